"""The replication worker: a consistent parallel snapshot, then the stream, into a target.

``pgshovel-replicate replication.yml SET`` runs it as a Spark application: the
loader reads every table of the set in key ranges from one exported snapshot,
the stream validates the Kafka topic and hands over whole committed batches, and
the target applies each micro-batch together with the worker's own state.
"""
