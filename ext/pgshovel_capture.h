/*
 * pgshovel_capture.h - what the capture trigger (pgshovel_capture.c) and its
 * packing of changes into fewer queue rows (packing.c) share.
 */
#ifndef PGSHOVEL_CAPTURE_H
#define PGSHOVEL_CAPTURE_H

#include "postgres.h"

#include "executor/spi.h"
#include "utils/rel.h"

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
	bool		direct;			/* insert straight into table_oid (see direct_insert) */
	AttrNumber	columns[EVENT_COLUMNS];	/* attnums of ev_id, ev_time, ev_txid, ... */
} QueueEntry;

/*
 * One row into the queue's current event table: values and nulls ('n') of ev_id,
 * ev_time, ev_type, ev_data, ev_extra1..4, straight into the table (direct) or
 * through the kept INSERT plan (SPI connected). In pgshovel_capture.c.
 */
extern void write_event(QueueEntry *entry, Datum *values, const char *nulls, bool direct);

/* A transaction's pack of one queue's changes (packing.c). */
typedef struct Pack Pack;

extern Pack *pack_for(QueueEntry *entry, const char *argument, bool direct);
extern int	pack_table(Pack *pack, const char *schema, const char *name, const char *version,
					   const char *keys);
extern void pack_add(Pack *pack, int table, const char *type, const char *data, int length,
					 bool check_sequence);
extern void pack_end_call(Pack *pack);

#endif							/* PGSHOVEL_CAPTURE_H */
