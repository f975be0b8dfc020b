"""pgshovel-relay: PgQ batches to Begin/Mutation/Commit/Rollback messages on Kafka."""
