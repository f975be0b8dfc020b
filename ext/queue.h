/*
 * queue.h - one PgQ queue as this backend writes into it (queue.c); used by the
 * capture trigger (pgshovel_capture.c) and its packing (packing.c).
 */
#ifndef PGSHOVEL_QUEUE_H
#define PGSHOVEL_QUEUE_H

#include "postgres.h"

#include "executor/spi.h"
#include "storage/itemptr.h"

#define NAME_SIZE 256

/* The columns an event fills, in the order of insert_event's values, then ev_txid. */
#define EVENT_COLUMNS 9

/* One queue as this backend knows it; valid for one transaction at a time. */
typedef struct QueueEntry
{
	char		name[NAME_SIZE];	/* hash key: the queue's name */
	LocalTransactionId lxid;	/* the transaction the fields below hold for */
	int32		queue_id;
	int32		cur_table;
	Oid			event_seq;
	bool		disabled;
	int32		per_tx_limit;	/* -1: none */
	int32		count;			/* events of this transaction */
	Oid			table_oid;		/* the current event table */
	int32		plan_queue_id;	/* the table the plan inserts into */
	int32		plan_table;
	SPIPlanPtr	plan;
	bool		direct;			/* insert straight into table_oid (see direct_possible) */
	AttrNumber	columns[EVENT_COLUMNS];	/* attnums of ev_id, ev_time, ev_txid, ... */
	ItemPointerData queue_tid;	/* where pgq.queue's index led to its row last time */
	uint64		tid_generation; /* ... valid while the catalog's generation is this (0: never) */
} QueueEntry;

/* The backend's entry for the queue named name (created empty on first use). */
extern QueueEntry *queue_entry(const char *name);

/*
 * The queue's row in pgq.queue read into entry once per transaction, with the
 * INSERT plan of its current event table; SPI must be connected.
 */
extern void load_queue(QueueEntry *entry, Datum name);

/*
 * One row into the queue's current event table: values and nulls ('n') of ev_id,
 * ev_time, ev_type, ev_data, ev_extra1..4, straight into the table (direct) or
 * through the kept INSERT plan (SPI connected).
 */
extern void write_event(QueueEntry *entry, Datum *values, const char *nulls, bool direct);

#endif							/* PGSHOVEL_QUEUE_H */
