/*
 * pgshovel_capture.c - the capture trigger in C.
 *
 * The same contract as sql/capture.sql (its PL/pgSQL twin, used where this
 * library is not installed): every trigger of a set calls it with
 *   TG_ARGV[0]  PgQ queue name
 *   TG_ARGV[1]  set version (ev_extra3)
 *   TG_ARGV[2]  key columns as a JSON array (ev_extra4)
 *   TG_ARGV[3]  captured columns as a text[] literal; '' captures every column
 *   TG_ARGV[4]  '1': stamp every event with its provenance (absent or '': no)
 *   TG_ARGV[5]  packing (packing.c): "ROWS,BYTES", or "ROWS,BYTES,copy" for
 *               packs of COPY lines; absent or '': one event per change
 * and it writes one event per row change into the queue's current event table:
 *   ev_type 'I' | 'U' | 'D' | 'T', ev_data the JSON array [old, new] where each
 *   row is null or an object mapping column name to the column's text (its
 *   type's output function) or null; ev_extra1/2 the table's schema and name.
 *   With provenance the array is [old, new, provenance] (see append_provenance
 *   and sql/capture.sql's header), taken once per call; a statement trigger's
 *   events after its first hold [old, new, 1] (the previous event's).
 * An UPDATE that leaves the captured columns as they were writes nothing.
 *
 * Two kinds of triggers call it, with the same events as a result:
 *   - statement triggers, one per event (AFTER INSERT REFERENCING NEW TABLE,
 *     AFTER UPDATE REFERENCING OLD TABLE AND NEW TABLE, AFTER DELETE
 *     REFERENCING OLD TABLE, FOR EACH STATEMENT): every row of the transition
 *     tables, in the order the statement changed them (PostgreSQL stores an
 *     UPDATE's old and new row together, so the two tables pair row for row),
 *     rendered and written in batches (heap_multi_insert: one WAL record per
 *     page instead of one per event). What pgshovel-admin installs on a table
 *     where they capture exactly what happened (see check_statement_capture);
 *   - row triggers (AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW), one event
 *     per call, everywhere else;
 * and a TRUNCATE statement trigger.
 *
 * Why it is faster than the PL/pgSQL function it replaces:
 *   - the output settings that change a value's text (DateStyle, IntervalStyle,
 *     TimeZone, extra_float_digits, bytea_output) are compared with the pinned
 *     values and only set (and restored) when a session differs;
 *   - the queue's row in pgq.queue is read once per transaction (straight
 *     through its index), not once per event as pgq.insert_event_raw does.
 *     A transaction running across a
 *     table rotation may keep writing into the previous table: PgQ reads both
 *     tables for every batch such a transaction can fall in (batch_event_tables
 *     compares the batch's txid range with the switch's), which is also what
 *     happens to a REPEATABLE READ writer with pgq.insert_event, whose
 *     snapshot shows it the same queue row all along;
 *   - the row is rendered straight into the event's JSON, with the output
 *     functions looked up once per statement (integers printed and text
 *     copied in place: the same text, without a call);
 *   - the event goes straight into the current event table (a heap insert and
 *     its index entries, what the executor's INSERT would write) when that
 *     table is exactly as PgQ makes it, and the function's owner may insert
 *     into it; otherwise through a kept SPI plan of an INSERT, so a table with
 *     triggers, rules, defaults or other indexes still gets everything it asks.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/hio.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "nodes/execnodes.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/datum.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "pgtime.h"

#include "packing.h"
#include "queue.h"

PG_MODULE_MAGIC;

/*
 * What pgshovel_capture_revision() answers: 3, provenance (TG_ARGV[4]) besides the
 * statement triggers of contract 2, which pgshovel_capture_contract() keeps answering.
 * pgshovel_capture_contract_version() answers the highest contract this library
 * serves, every lower one included: 5, packing with COPY lines (TG_ARGV[5]
 * "ROWS,BYTES,copy", see packing.c) besides packing (4, "ROWS,BYTES").
 */
#define CONTRACT 3
#define CONTRACT_VERSION 5
/* Events written per heap_multi_insert, and the bytes of event data that end a batch early. */
#define BATCH_EVENTS 1000
#define BATCH_BYTES (4 * 1024 * 1024)

PG_FUNCTION_INFO_V1(pgshovel_capture);


/*
 * How a column's text is made: by its output function, or, for the output
 * functions whose text is plain to make, the same text made in place (no
 * call, no copy): int2out, int4out and int8out print with pg_itoa, pg_ltoa and
 * pg_lltoa; textout, varcharout and bpcharout return the value's bytes.
 */
#define KIND_OUTPUT 0
#define KIND_INT2 1
#define KIND_INT4 2
#define KIND_INT8 3
#define KIND_TEXT 4

/* Per trigger and statement (fn_extra): output functions and captured columns. */
typedef struct RowPlan
{
	Oid			relid;
	int			natts;
	Oid		   *types;
	FmgrInfo   *output;
	bool	   *captured;
	char	   *kinds;			/* per captured column: how its text is made (KIND_*) */
	NameData   *names;			/* per captured column: its name when the labels were made */
	char	  **labels;			/* per captured column: [", "]"name": (escaped once) */
	int		   *label_lengths;
	char	   *columns;		/* TG_ARGV[3] these flags were computed for */
	char	   *column_list;	/* the captured columns' names as a JSON array (COPY lines) */
} RowPlan;

static void
insert_event(QueueEntry *entry, Datum name, const char *type, const char *data,
			 Relation rel, TriggerData *trigdata)
{
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	char	   *args[2] = {trigdata->tg_trigger->tgargs[1], trigdata->tg_trigger->tgargs[2]};

	load_queue(entry, name);
	if (entry->disabled && SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		ereport(ERROR,
				(errmsg("pgshovel capture: inserts into queue \"%s\" are disabled", entry->name)));
	if (entry->per_tx_limit >= 0 && ++entry->count > entry->per_tx_limit)
		ereport(ERROR,
				(errmsg("pgshovel capture: queue \"%s\" allows at most %d events per transaction",
						entry->name, entry->per_tx_limit)));
	values[0] = DirectFunctionCall1(nextval_oid, ObjectIdGetDatum(entry->event_seq));
	values[1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	values[2] = CStringGetTextDatum(type);
	values[3] = CStringGetTextDatum(data);
	values[4] = CStringGetTextDatum(get_namespace_name(RelationGetNamespace(rel)));
	values[5] = CStringGetTextDatum(RelationGetRelationName(rel));
	values[6] = CStringGetTextDatum(args[0]);
	values[7] = CStringGetTextDatum(args[1]);
	write_event(entry, values, nulls,
				entry->direct
				&& pg_class_aclcheck(entry->table_oid, GetUserId(), ACL_INSERT) == ACLCHECK_OK);
}

/*
 * A call's pack (packing on: TG_ARGV[5]): the queue read and checked as
 * insert_event does, the table's ev_extra1..4 (and, for COPY lines, its captured
 * columns ``columns``; NULL: JSON) in the pack as *table. Events go
 * straight into the event table where insert_event's would, and then may wait
 * for the end of the transaction; its lock is taken now, as an insert would.
 */
static Pack *
pack_begin(QueueEntry *entry, Datum name, Relation rel, Trigger *trigger, const char *columns,
		   int *table)
{
	bool		direct;
	Pack	   *pack;

	load_queue(entry, name);
	if (entry->disabled && SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		ereport(ERROR,
				(errmsg("pgshovel capture: inserts into queue \"%s\" are disabled", entry->name)));
	direct = entry->direct
		&& pg_class_aclcheck(entry->table_oid, GetUserId(), ACL_INSERT) == ACLCHECK_OK;
	if (direct)
		LockRelationOid(entry->table_oid, RowExclusiveLock);
	pack = pack_for(entry, trigger->tgargs[5], direct);
	*table = pack_table(pack, get_namespace_name(RelationGetNamespace(rel)),
						RelationGetRelationName(rel), trigger->tgargs[1], trigger->tgargs[2],
						columns);
	return pack;
}

/*
 * The events of one statement trigger call, written in batches: rendered
 * (under the pinned settings) into the batch's memory, then given their ev_id
 * in row order and written together, straight into the event table with
 * heap_multi_insert and one index insert per event, or one by one through the
 * INSERT plan where the table is not exactly as PgQ makes it.
 */
typedef struct EventBatch
{
	QueueEntry *entry;
	Datum		values[8];		/* as insert_event's; [0], [2] and [3] set per event */
	char		nulls[8];
	bool		direct;
	Relation	events;			/* the event table (direct) */
	TupleDesc	event_desc;
	BulkInsertState bulk;
	int			nindexes;
	Relation   *indexes;
	IndexInfo **index_info;
	TupleTableSlot **slots;		/* made as needed, up to BATCH_EVENTS */
	int			nslots;
	MemoryContext context;		/* the pending events; reset after each write */
	MemoryContext statement;	/* what lasts the whole call: the slots */
	int			capacity;		/* events a batch holds: BATCH_EVENTS, or the rows if fewer */
	int			count;			/* pending events */
	Size		bytes;			/* their data */
	char	  **types;
	text	  **data;
	Pack	   *pack;			/* packing on: the events go into it instead (batch_packed) */
	int			table;			/* the table's index in the pack */
	bool		sequence_checked;	/* nextval's permission check done (packing) */
} EventBatch;

static void
batch_begin(EventBatch *batch, QueueEntry *entry, Datum name, Relation rel, Trigger *trigger,
			int64 rows)
{
	int			i;

	MemSet(batch, 0, sizeof(EventBatch));
	batch->entry = entry;
	batch->capacity = (int) Min(rows, BATCH_EVENTS);
	batch->types = palloc(sizeof(char *) * batch->capacity);
	batch->data = palloc(sizeof(text *) * batch->capacity);
	load_queue(entry, name);
	if (entry->disabled && SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		ereport(ERROR,
				(errmsg("pgshovel capture: inserts into queue \"%s\" are disabled", entry->name)));
	for (i = 0; i < 8; i++)
		batch->nulls[i] = ' ';
	batch->values[1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	batch->values[4] = CStringGetTextDatum(get_namespace_name(RelationGetNamespace(rel)));
	batch->values[5] = CStringGetTextDatum(RelationGetRelationName(rel));
	batch->values[6] = CStringGetTextDatum(trigger->tgargs[1]);
	batch->values[7] = CStringGetTextDatum(trigger->tgargs[2]);
	batch->direct = entry->direct
		&& pg_class_aclcheck(entry->table_oid, GetUserId(), ACL_INSERT) == ACLCHECK_OK;
	if (batch->direct)
	{
		List	   *indexes;
		ListCell   *cell;

		batch->events = table_open(entry->table_oid, RowExclusiveLock);
		batch->event_desc = RelationGetDescr(batch->events);
		/*
		 * Several events: kept pinned on the page being filled, but without
		 * the bulk-write ring (the queue's pages are read again soon, by the
		 * consumer).
		 */
		if (rows > 1)
		{
			batch->bulk = GetBulkInsertState();
			FreeAccessStrategy(batch->bulk->strategy);
			batch->bulk->strategy = NULL;
		}
		indexes = RelationGetIndexList(batch->events);
		batch->indexes = palloc0(sizeof(Relation) * Max(list_length(indexes), 1));
		batch->index_info = palloc0(sizeof(IndexInfo *) * Max(list_length(indexes), 1));
		foreach(cell, indexes)
		{
			Relation	index = index_open(lfirst_oid(cell), RowExclusiveLock);

			batch->indexes[batch->nindexes] = index;
			batch->index_info[batch->nindexes] = BuildIndexInfo(index);
			batch->nindexes++;
		}
		batch->slots = palloc0(sizeof(TupleTableSlot *) * batch->capacity);
	}
	batch->statement = CurrentMemoryContext;
	/* several batches: one block kept across them, no new memory from the system for each */
	if (rows > BATCH_EVENTS)
		batch->context = AllocSetContextCreate(CurrentMemoryContext, "pgshovel capture batch",
											   1024 * 1024, 1024 * 1024, 8 * 1024 * 1024);
	else
		batch->context = AllocSetContextCreate(CurrentMemoryContext, "pgshovel capture batch",
											   ALLOCSET_DEFAULT_SIZES);
}

/*
 * With packing, a batch only bounds the memory of rendering: each event goes
 * into the pack as it is added (taking its id), the pack writes itself.
 */
static void
batch_packed(EventBatch *batch, Pack *pack, int table, int64 rows)
{
	MemSet(batch, 0, sizeof(EventBatch));
	batch->pack = pack;
	batch->table = table;
	batch->capacity = (int) Min(rows, BATCH_EVENTS);
	batch->statement = CurrentMemoryContext;
	batch->context = AllocSetContextCreate(CurrentMemoryContext, "pgshovel capture batch",
										   ALLOCSET_DEFAULT_SIZES);
}

/* One more event; ``data`` is copied into the batch's memory. */
static void
batch_add(EventBatch *batch, char *type, StringInfo data)
{
	QueueEntry *entry = batch->entry;

	if (batch->pack != NULL)
	{
		pack_add(batch->pack, batch->table, type, data->data, data->len,
				 !batch->sequence_checked);
		batch->sequence_checked = true;
		batch->count++;
		batch->bytes += data->len;
		return;
	}
	if (entry->per_tx_limit >= 0 && ++entry->count > entry->per_tx_limit)
		ereport(ERROR,
				(errmsg("pgshovel capture: queue \"%s\" allows at most %d events per transaction",
						entry->name, entry->per_tx_limit)));
	batch->types[batch->count] = type;
	batch->data[batch->count] = (text *) MemoryContextAlloc(batch->context,
															 data->len + VARHDRSZ);
	SET_VARSIZE(batch->data[batch->count], data->len + VARHDRSZ);
	memcpy(VARDATA(batch->data[batch->count]), data->data, data->len);
	batch->count++;
	batch->bytes += data->len;
}

static bool
batch_full(EventBatch *batch)
{
	return batch->count >= batch->capacity || batch->bytes >= BATCH_BYTES;
}

/* Write the pending events, in the order they were added. */
static void
batch_write(EventBatch *batch)
{
	QueueEntry *entry = batch->entry;
	MemoryContext previous = MemoryContextSwitchTo(batch->context);
	int			i;

	if (batch->pack != NULL)
	{
		/* the events are in the pack already */
	}
	else if (batch->count > 0 && batch->direct)
	{
		TupleDesc	desc = batch->event_desc;
		Datum	   *row = palloc0(sizeof(Datum) * desc->natts);
		bool	   *empty = palloc(sizeof(bool) * desc->natts);
		int			k;

		for (i = 0; i < desc->natts; i++)
			empty[i] = true;
		for (i = 0; i < EVENT_COLUMNS - 1; i++)
		{
			row[entry->columns[i] - 1] = batch->values[i];
			empty[entry->columns[i] - 1] = false;
		}
		/* ev_txid: what its default, txid_current(), gives */
		row[entry->columns[EVENT_COLUMNS - 1] - 1] =
			Int64GetDatum((int64) U64FromFullTransactionId(GetTopFullTransactionId()));
		empty[entry->columns[EVENT_COLUMNS - 1] - 1] = false;
		for (i = 0; i < batch->count; i++)
		{
			/* nextval(): its permission check once, for the first event of the batch */
			row[entry->columns[0] - 1] =
				Int64GetDatum(nextval_internal(entry->event_seq, i == 0));
			row[entry->columns[2] - 1] = CStringGetTextDatum(batch->types[i]);
			row[entry->columns[3] - 1] = PointerGetDatum(batch->data[i]);
			if (i >= batch->nslots)
			{
				MemoryContextSwitchTo(batch->statement);
				batch->slots[batch->nslots++] =
					MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
				MemoryContextSwitchTo(batch->context);
			}
			/* the slot owns it: no copy when table_multi_insert materializes it */
			ExecStoreHeapTuple(heap_form_tuple(desc, row, empty), batch->slots[i], true);
		}
		table_multi_insert(batch->events, batch->slots, batch->count,
						   GetCurrentCommandId(true), 0, batch->bulk);
		for (k = 0; k < batch->nindexes; k++)
		{
			Relation	index = batch->indexes[k];
			IndexInfo  *info = batch->index_info[k];
			Datum		keys[INDEX_MAX_KEYS];
			bool		missing[INDEX_MAX_KEYS];
			int			a;

			/* like ExecInsertIndexTuples: an index being built is left alone */
			if (!index->rd_index->indisready)
				continue;
			for (i = 0; i < batch->count; i++)
			{
				for (a = 0; a < info->ii_NumIndexAttrs; a++)
					keys[a] = slot_getattr(batch->slots[i], info->ii_IndexAttrNumbers[a],
										   &missing[a]);
				index_insert(index, keys, missing, &batch->slots[i]->tts_tid, batch->events,
							 UNIQUE_CHECK_NO, false, info);
			}
		}
		for (i = 0; i < batch->count; i++)
			ExecClearTuple(batch->slots[i]);
	}
	else
	{
		for (i = 0; i < batch->count; i++)
		{
			batch->values[0] =
				DirectFunctionCall1(nextval_oid, ObjectIdGetDatum(entry->event_seq));
			batch->values[2] = CStringGetTextDatum(batch->types[i]);
			batch->values[3] = PointerGetDatum(batch->data[i]);
			if (SPI_execute_plan(entry->plan, batch->values, batch->nulls, false, 0)
				!= SPI_OK_INSERT)
				elog(ERROR, "pgshovel capture: inserting into queue \"%s\" failed",
					 entry->name);
		}
	}
	MemoryContextSwitchTo(previous);
	MemoryContextReset(batch->context);
	batch->count = 0;
	batch->bytes = 0;
}

static void
batch_end(EventBatch *batch)
{
	int			i;

	if (batch->pack != NULL)
	{
		pack_end_call(batch->pack);
		return;
	}
	if (!batch->direct)
		return;
	for (i = 0; i < batch->nslots; i++)
		ExecDropSingleTupleTableSlot(batch->slots[i]);
	for (i = 0; i < batch->nindexes; i++)
		index_close(batch->indexes[i], NoLock);
	if (batch->bulk != NULL)
		FreeBulkInsertState(batch->bulk);
	table_close(batch->events, NoLock);
}

/* Are the settings that change a value's text the pinned ones already? */
static bool
settings_pinned(void)
{
	const char *zone;

	if (DateStyle != USE_ISO_DATES || DateOrder != DATEORDER_MDY
		|| IntervalStyle != INTSTYLE_POSTGRES || extra_float_digits != 1
		|| bytea_output != BYTEA_OUTPUT_HEX || session_timezone == NULL)
		return false;
	zone = pg_get_timezone_name(session_timezone);
	return zone != NULL && (strcmp(zone, "UTC") == 0 || strcmp(zone, "Etc/UTC") == 0);
}

/* Pin them for this call; the caller ends the nest level with AtEOXact_GUC. */
static int
pin_settings(void)
{
	static const char *const pinned[][2] = {
		{"datestyle", "ISO, MDY"},
		{"intervalstyle", "postgres"},
		{"timezone", "UTC"},
		{"extra_float_digits", "1"},
		{"bytea_output", "hex"},
	};
	int			level = NewGUCNestLevel();
	int			i;

	for (i = 0; i < lengthof(pinned); i++)
		(void) set_config_option(pinned[i][0], pinned[i][1], PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* The names in the text[] literal ``columns`` (as set create writes it). */
static char **
column_names(const char *columns, int *count)
{
	Datum		array = OidInputFunctionCall(F_ARRAY_IN, (char *) columns, TEXTOID, -1);
	Datum	   *elements;
	bool	   *nulls;
	char	  **names;
	int			i;

	deconstruct_array(DatumGetArrayTypeP(array), TEXTOID, -1, false, TYPALIGN_INT,
					  &elements, &nulls, count);
	names = palloc(sizeof(char *) * Max(*count, 1));
	for (i = 0; i < *count; i++)
		names[i] = nulls[i] ? NULL : TextDatumGetCString(elements[i]);
	return names;
}

static bool
listed(char **names, int count, const char *name)
{
	int			i;

	for (i = 0; i < count; i++)
	{
		if (names[i] != NULL && strcmp(names[i], name) == 0)
			return true;
	}
	return false;
}

static RowPlan *
row_plan(FunctionCallInfo fcinfo, Relation rel, const char *columns)
{
	TupleDesc	desc = RelationGetDescr(rel);
	RowPlan    *plan = (RowPlan *) fcinfo->flinfo->fn_extra;
	MemoryContext context = fcinfo->flinfo->fn_mcxt;
	char	  **names = NULL;
	int			count = 0;
	bool		first = true;
	int			i;
	StringInfoData list;

	if (plan != NULL && plan->relid == RelationGetRelid(rel) && plan->natts == desc->natts
		&& strcmp(plan->columns, columns) == 0)
	{
		for (i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute attribute = TupleDescAttr(desc, i);

			if (!attribute->attisdropped && plan->types[i] != attribute->atttypid)
				break;
			if (plan->captured[i]
				&& strcmp(NameStr(plan->names[i]), NameStr(attribute->attname)) != 0)
				break;
		}
		if (i == desc->natts)
			return plan;
	}
	plan = MemoryContextAllocZero(context, sizeof(RowPlan));
	plan->relid = RelationGetRelid(rel);
	plan->natts = desc->natts;
	plan->types = MemoryContextAllocZero(context, sizeof(Oid) * Max(desc->natts, 1));
	plan->output = MemoryContextAllocZero(context, sizeof(FmgrInfo) * Max(desc->natts, 1));
	plan->captured = MemoryContextAllocZero(context, sizeof(bool) * Max(desc->natts, 1));
	plan->kinds = MemoryContextAllocZero(context, sizeof(char) * Max(desc->natts, 1));
	plan->names = MemoryContextAllocZero(context, sizeof(NameData) * Max(desc->natts, 1));
	plan->labels = MemoryContextAllocZero(context, sizeof(char *) * Max(desc->natts, 1));
	plan->label_lengths = MemoryContextAllocZero(context, sizeof(int) * Max(desc->natts, 1));
	plan->columns = MemoryContextStrdup(context, columns);
	if (columns[0] != '\0')
		names = column_names(columns, &count);
	initStringInfo(&list);
	appendStringInfoChar(&list, '[');
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attribute = TupleDescAttr(desc, i);
		Oid			function;
		bool		varlena;
		StringInfoData label;

		if (attribute->attisdropped)
			continue;
		plan->captured[i] = names == NULL || listed(names, count, NameStr(attribute->attname));
		if (!plan->captured[i])
			continue;
		plan->types[i] = attribute->atttypid;
		getTypeOutputInfo(attribute->atttypid, &function, &varlena);
		fmgr_info_cxt(function, &plan->output[i], context);
		switch (function)
		{
			case F_INT2OUT:
				plan->kinds[i] = KIND_INT2;
				break;
			case F_INT4OUT:
				plan->kinds[i] = KIND_INT4;
				break;
			case F_INT8OUT:
				plan->kinds[i] = KIND_INT8;
				break;
			case F_TEXTOUT:
			case F_VARCHAROUT:
			case F_BPCHAROUT:
				plan->kinds[i] = KIND_TEXT;
				break;
			default:
				plan->kinds[i] = KIND_OUTPUT;
		}
		initStringInfo(&label);
		if (!first)
			appendStringInfoString(&label, ", ");
		first = false;
		escape_json(&label, NameStr(attribute->attname));
		appendStringInfoString(&label, ": ");
		if (list.len > 1)
			appendStringInfoChar(&list, ',');
		escape_json(&list, NameStr(attribute->attname));
		plan->names[i] = attribute->attname;
		plan->labels[i] = MemoryContextStrdup(context, label.data);
		plan->label_lengths[i] = label.len;
		pfree(label.data);
	}
	appendStringInfoChar(&list, ']');
	plan->column_list = MemoryContextStrdup(context, list.data);
	pfree(list.data);
	fcinfo->flinfo->fn_extra = plan;
	return plan;
}

/* The bytes escape_json changes: control characters, '"' and '\'. */
static const bool json_special[256] = {
	[0] = true, [1] = true, [2] = true, [3] = true, [4] = true, [5] = true, [6] = true,
	[7] = true, [8] = true, [9] = true, [10] = true, [11] = true, [12] = true, [13] = true,
	[14] = true, [15] = true, [16] = true, [17] = true, [18] = true, [19] = true, [20] = true,
	[21] = true, [22] = true, [23] = true, [24] = true, [25] = true, [26] = true, [27] = true,
	[28] = true, [29] = true, [30] = true, [31] = true, ['"'] = true, ['\\'] = true,
};

/*
 * escape_json's output for ``length`` bytes of text (no NUL among them),
 * appended faster: most values need no escaping and go in with one copy.
 */
static void
append_json_bytes(StringInfo out, const char *text, int length)
{
	int			i;

	for (i = 0; i < length; i++)
	{
		if (json_special[(unsigned char) text[i]])
		{
			char	   *copy = pnstrdup(text, length);

			escape_json(out, copy);
			pfree(copy);
			return;
		}
	}
	enlargeStringInfo(out, length + 2);
	out->data[out->len++] = '"';
	memcpy(out->data + out->len, text, length);
	out->len += length;
	out->data[out->len++] = '"';
	out->data[out->len] = '\0';
}

/* How a value's text goes into a row: JSON string or COPY field. */
typedef void (*AppendText) (StringInfo out, const char *text, int length);

/* An integer's text (what its output function prints), between ``quote``s if not NUL. */
static inline void
append_integer(StringInfo out, int kind, Datum value, char quote)
{
	enlargeStringInfo(out, MAXINT8LEN + 3);
	if (quote)
		out->data[out->len++] = quote;
	if (kind == KIND_INT2)
		out->len += pg_itoa(DatumGetInt16(value), out->data + out->len);
	else if (kind == KIND_INT4)
		out->len += pg_ltoa(DatumGetInt32(value), out->data + out->len);
	else
		out->len += pg_lltoa(DatumGetInt64(value), out->data + out->len);
	if (quote)
		out->data[out->len++] = quote;
	out->data[out->len] = '\0';
}

/* A column's non-null value: its text, through ``append`` (integers between ``quote``s). */
static inline void
append_value(StringInfo out, RowPlan *plan, int i, Datum value, AppendText append, char quote)
{
	if (plan->kinds[i] == KIND_TEXT)
	{
		text	   *unpacked = DatumGetTextPP(value);

		append(out, VARDATA_ANY(unpacked), VARSIZE_ANY_EXHDR(unpacked));
		if ((Pointer) unpacked != DatumGetPointer(value))
			pfree(unpacked);
	}
	else if (plan->kinds[i] != KIND_OUTPUT)
		append_integer(out, plan->kinds[i], value, quote);
	else
	{
		char	   *text = OutputFunctionCall(&plan->output[i], value);

		append(out, text, strlen(text));
	}
}

/* One column of a row into its JSON object: its label, then its text or null. */
static inline void
render_value(StringInfo out, RowPlan *plan, int i, Datum value, bool isnull)
{
	appendBinaryStringInfo(out, plan->labels[i], plan->label_lengths[i]);
	if (isnull)
		appendBinaryStringInfo(out, "null", 4);
	else
		append_value(out, plan, i, value, append_json_bytes, '"');
}


/*
 * ``length`` bytes of text as one COPY text field: '\\', tab, newline and
 * carriage return escaped with a backslash, nothing else (what
 * pgshovel.stream.rows.copy_field makes of the same text).
 */
static void
append_copy_bytes(StringInfo out, const char *text, int length)
{
	int			i;
	int			done = 0;

	enlargeStringInfo(out, length);
	for (i = 0; i < length; i++)
	{
		char		c = text[i];
		char		escaped;

		if (c == '\\')
			escaped = '\\';
		else if (c == '\t')
			escaped = 't';
		else if (c == '\n')
			escaped = 'n';
		else if (c == '\r')
			escaped = 'r';
		else
			continue;
		appendBinaryStringInfo(out, text + done, i - done);
		appendStringInfoChar(out, '\\');
		appendStringInfoChar(out, escaped);
		done = i + 1;
	}
	appendBinaryStringInfo(out, text + done, length - done);
}

/* One column of a row as a COPY field (after a tab unless it is the first). */
static inline void
render_copy_value(StringInfo out, RowPlan *plan, int i, Datum value, bool isnull, bool first)
{
	if (!first)
		appendStringInfoChar(out, '\t');
	if (isnull)
		appendBinaryStringInfo(out, "\\N", 2);
	else
		append_value(out, plan, i, value, append_copy_bytes, '\0');
}

/*
 * The row's captured columns: a JSON object of column name to text or null,
 * or (``copy``, packing with COPY lines) one COPY text line.
 */
static void
render(StringInfo out, RowPlan *plan, TupleDesc desc, HeapTuple tuple, bool copy)
{
	int			i;
	bool		first = true;

	if (!copy)
		appendStringInfoChar(out, '{');
	for (i = 0; i < desc->natts; i++)
	{
		Datum		value;
		bool		isnull;

		if (TupleDescAttr(desc, i)->attisdropped || !plan->captured[i])
			continue;
		value = heap_getattr(tuple, i + 1, desc, &isnull);
		if (copy)
			render_copy_value(out, plan, i, value, isnull, first);
		else
			render_value(out, plan, i, value, isnull);
		first = false;
	}
	if (!copy)
		appendStringInfoChar(out, '}');
}

/* The same for a row of a transition table. */
static void
render_slot(StringInfo out, RowPlan *plan, TupleDesc desc, TupleTableSlot *slot, bool copy)
{
	int			i;
	bool		first = true;

	slot_getallattrs(slot);
	if (!copy)
		appendStringInfoChar(out, '{');
	for (i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped || !plan->captured[i])
			continue;
		if (copy)
			render_copy_value(out, plan, i, slot->tts_values[i], slot->tts_isnull[i], first);
		else
			render_value(out, plan, i, slot->tts_values[i], slot->tts_isnull[i]);
		first = false;
	}
	if (!copy)
		appendStringInfoChar(out, '}');
}

/* Is ``function`` a pgshovel capture function (pgshovel_<cluster>.capture)? */
static bool
capture_function(Oid function, Oid mine)
{
	char	   *name;
	char	   *schema;

	if (function == mine)
		return true;
	name = get_func_name(function);
	schema = get_namespace_name(get_func_namespace(function));
	return name != NULL && schema != NULL && strcmp(name, "capture") == 0
		&& strncmp(schema, "pgshovel_", strlen("pgshovel_")) == 0;
}

/*
 * May this relation's statement triggers capture it? pgshovel-admin gives
 * row triggers instead to a table
 *   - in an inheritance tree: a statement on a parent fires no statement
 *     trigger of its children (their rows would be missed), and a parent's
 *     transition tables hold its children's rows too (captured as its own).
 *     The set's row trigger with a transition table that never fires keeps a
 *     table with statement triggers from becoming a child or a partition
 *     (PostgreSQL refuses); this catches one that became a parent since (a
 *     flag in the relation's cache: no catalog read otherwise);
 *   - with a trigger of its own that fires after its rows change (not an
 *     internal one, such as a foreign key's, nor a capture function): it may
 *     change rows of the table again before the statement's events are
 *     written, which would then come after the later change.
 * A table that got either since its set was created stops here, loudly.
 */
static void
check_statement_capture(Relation rel, Oid mine)
{
	TriggerDesc *triggers = rel->trigdesc;
	int			i;

	if (rel->rd_rel->relispartition
		|| (rel->rd_rel->relhassubclass
			&& find_inheritance_children(RelationGetRelid(rel), NoLock) != NIL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("pgshovel capture: table \"%s.%s\" is in an inheritance tree, where its statement triggers cannot capture exactly its rows",
						get_namespace_name(RelationGetNamespace(rel)),
						RelationGetRelationName(rel)),
				 errhint("Run pgshovel-admin set update for its sets: it then gets row triggers.")));
	for (i = 0; triggers != NULL && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];

		if (trigger->tgisinternal || trigger->tgenabled == TRIGGER_DISABLED
			|| (trigger->tgtype & (TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_INSTEAD)) != 0
			|| (trigger->tgtype & (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE
								   | TRIGGER_TYPE_DELETE)) == 0
			|| capture_function(trigger->tgfoid, mine))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("pgshovel capture: table \"%s.%s\" has trigger \"%s\", which fires after its rows change: its statement triggers would write the statement's events after what that trigger changes",
						get_namespace_name(RelationGetNamespace(rel)),
						RelationGetRelationName(rel), trigger->tgname),
				 errhint("Run pgshovel-admin set update for its sets: it then gets row triggers.")));
	}
}

/* Read ``rows`` from its first row on, with a read pointer of our own. */
static void
read_from_start(Tuplestorestate *rows)
{
	if (rows == NULL)
		return;
	tuplestore_select_read_pointer(rows, tuplestore_alloc_read_pointer(rows, EXEC_FLAG_REWIND));
	tuplestore_rescan(rows);
}

/*
 * An UPDATE whose SET list names no captured column changes none, unless a
 * BEFORE ROW trigger changed one (it is not in tg_updatedcols): no event then.
 */
static bool
no_captured_column_updated(TriggerData *trigdata, RowPlan *plan)
{
	Relation	rel = trigdata->tg_relation;
	int			i;

	if (trigdata->tg_trigger->tgargs[3][0] == '\0' || trigdata->tg_updatedcols == NULL
		|| (rel->trigdesc != NULL && rel->trigdesc->trig_update_before_row))
		return false;
	for (i = 0; i < plan->natts; i++)
	{
		if (plan->captured[i]
			&& bms_is_member(i + 1 - FirstLowInvalidHeapAttributeNumber,
							 trigdata->tg_updatedcols))
			return false;
	}
	return true;
}

/* host(inet_client_addr()) of this session, or NULL; computed once (it never changes). */
static char *client_host = NULL;
static bool client_host_known = false;

/* The client's address as host(inet_client_addr()) shows it; NULL over a Unix socket. */
static const char *
client_address(void)
{
	LOCAL_FCINFO(call, 0);
	Datum		address;

	if (client_host_known)
		return client_host;
	InitFunctionCallInfoData(*call, NULL, 0, InvalidOid, NULL, NULL);
	address = inet_client_addr(call);
	if (!call->isnull)
		client_host = MemoryContextStrdup(TopMemoryContext,
										  TextDatumGetCString(DirectFunctionCall1(network_host,
																				  address)));
	client_host_known = true;
	return client_host;
}

/*
 * The provenance of a call's events, byte for byte what sql/capture.sql's stamp
 * holds: ,{"u":..,"s":..,"a":..,"c":..,"q":..,"n":..} with every key but "s" left
 * out when it says nothing. "u" is the role outside SECURITY DEFINER functions
 * (this function runs as its owner), left out when it is session_user; "a"
 * left out when empty; "c" over a Unix socket; "q" (the top-level statement's
 * query id, pg_stat_activity.query_id, signed) when 0; "n" (pgshovel.annotation)
 * when unset or empty.
 */
static void
append_provenance(StringInfo out)
{
	const char *annotation = GetConfigOption("pgshovel.annotation", true, false);
	const char *address = client_address();
	uint64		query_id = pgstat_get_my_query_id();
	Oid			outer = GetOuterUserId();
	Oid			session = GetSessionUserId();

	appendStringInfoString(out, ",{");
	if (outer != session)
	{
		appendStringInfoString(out, "\"u\":");
		escape_json(out, GetUserNameFromId(outer, false));
		appendStringInfoChar(out, ',');
	}
	appendStringInfoString(out, "\"s\":");
	escape_json(out, GetUserNameFromId(session, false));
	if (application_name != NULL && application_name[0] != '\0')
	{
		appendStringInfoString(out, ",\"a\":");
		escape_json(out, application_name);
	}
	if (address != NULL)
	{
		appendStringInfoString(out, ",\"c\":");
		escape_json(out, address);
	}
	if (query_id != 0)
		appendStringInfo(out, ",\"q\":" INT64_FORMAT, (int64) query_id);
	if (annotation != NULL && annotation[0] != '\0')
	{
		appendStringInfoString(out, ",\"n\":");
		escape_json(out, annotation);
	}
	appendStringInfoChar(out, '}');
}

/*
 * A statement trigger's call: an event per row of its transition tables, the
 * first ending with stamp (the provenance, or empty) and, with provenance, the
 * others with 1: "the provenance of this transaction's previous event" (a bulk
 * statement then writes its provenance once, not once per row).
 */
static void
capture_statement(FunctionCallInfo fcinfo, TriggerData *trigdata, QueueEntry *entry,
				  Datum name, StringInfo stamp, bool packing)
{
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	Tuplestorestate *old_rows = NULL;
	Tuplestorestate *new_rows = NULL;
	TupleTableSlot *old_slot = NULL;
	TupleTableSlot *new_slot = NULL;
	EventBatch *batch;
	RowPlan    *plan;
	StringInfoData data;
	char	   *type;
	bool		done = false;
	const char *stamp_data = stamp->data;
	int			stamp_len = stamp->len;
	/* COPY lines instead of JSON (packing.c): packed, without provenance */
	bool		copy = packing && stamp->len == 0
		&& pack_copy_lines(trigdata->tg_trigger->tgargs[5]);

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		type = "I";
		new_rows = trigdata->tg_newtable;
	}
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		type = "U";
		old_rows = trigdata->tg_oldtable;
		new_rows = trigdata->tg_newtable;
	}
	else
	{
		type = "D";
		old_rows = trigdata->tg_oldtable;
	}
	if ((type[0] != 'I' && old_rows == NULL) || (type[0] != 'D' && new_rows == NULL))
		ereport(ERROR,
				(errmsg("pgshovel capture: statement trigger \"%s\" on \"%s\" has no transition tables",
						trigdata->tg_trigger->tgname, RelationGetRelationName(rel)),
				 errhint("Run pgshovel-admin set update to install the set's triggers again.")));
	check_statement_capture(rel, fcinfo->flinfo->fn_oid);
	if (tuplestore_tuple_count(old_rows != NULL ? old_rows : new_rows) == 0)
		return;
	if (old_rows != NULL && new_rows != NULL
		&& tuplestore_tuple_count(old_rows) != tuplestore_tuple_count(new_rows))
		elog(ERROR, "pgshovel capture: the transition tables of \"%s\" hold %lld old and %lld new rows",
			 RelationGetRelationName(rel), (long long) tuplestore_tuple_count(old_rows),
			 (long long) tuplestore_tuple_count(new_rows));
	plan = row_plan(fcinfo, rel, trigdata->tg_trigger->tgargs[3]);
	if (type[0] == 'U' && no_captured_column_updated(trigdata, plan))
		return;

	batch = palloc(sizeof(EventBatch));
	if (packing)
	{
		int			table;
		Pack	   *pack = pack_begin(entry, name, rel, trigdata->tg_trigger,
										  copy ? plan->column_list : NULL, &table);

		batch_packed(batch, pack, table,
					 tuplestore_tuple_count(old_rows != NULL ? old_rows : new_rows));
	}
	else
		batch_begin(batch, entry, name, rel, trigdata->tg_trigger,
					tuplestore_tuple_count(old_rows != NULL ? old_rows : new_rows));
	if (old_rows != NULL)
		old_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	if (new_rows != NULL)
		new_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	read_from_start(old_rows);
	read_from_start(new_rows);
	initStringInfo(&data);
	while (!done)
	{
		int			level = settings_pinned() ? -1 : pin_settings();
		MemoryContext previous = MemoryContextSwitchTo(batch->context);
		int			read;

		/*
		 * Up to a batch of rows read too: the memory their rendering takes is
		 * the batch's, even when an UPDATE changed none of their columns.
		 */
		for (read = 0; read < BATCH_EVENTS && !batch_full(batch); read++)
		{
			bool		have_old;
			bool		have_new;
			int			old_start = 0;
			int			old_length = 0;

			/*
			 * Not into the batch's memory: a tuplestore spilled to disk reads
			 * each row into new memory that the slot frees at the next row,
			 * maybe after the batch's memory was reset.
			 */
			MemoryContextSwitchTo(previous);
			have_old = old_rows != NULL
				&& tuplestore_gettupleslot(old_rows, true, false, old_slot);
			have_new = new_rows != NULL
				&& tuplestore_gettupleslot(new_rows, true, false, new_slot);
			MemoryContextSwitchTo(batch->context);

			if (!have_old && !have_new)
			{
				done = true;
				break;
			}
			resetStringInfo(&data);
			if (copy)
			{
				if (have_old)
				{
					render_slot(&data, plan, desc, old_slot, true);
					old_length = data.len;
				}
				if (have_old && have_new)
					appendStringInfoChar(&data, '\n');
				if (have_new)
				{
					int			new_start = data.len;

					render_slot(&data, plan, desc, new_slot, true);
					/* an UPDATE that leaves the captured columns as they were */
					if (have_old && data.len - new_start == old_length
						&& memcmp(data.data, data.data + new_start, old_length) == 0)
						continue;
				}
				batch_add(batch, type, &data);
				continue;
			}
			appendStringInfoChar(&data, '[');
			if (have_old)
			{
				old_start = data.len;
				render_slot(&data, plan, desc, old_slot, false);
				old_length = data.len - old_start;
			}
			else
				appendBinaryStringInfo(&data, "null", 4);
			appendStringInfoChar(&data, ',');
			if (have_new)
			{
				int			new_start = data.len;

				render_slot(&data, plan, desc, new_slot, false);
				/* an UPDATE that leaves the captured columns as they were */
				if (have_old && data.len - new_start == old_length
					&& memcmp(data.data + old_start, data.data + new_start, old_length) == 0)
					continue;
			}
			else
				appendBinaryStringInfo(&data, "null", 4);
			appendBinaryStringInfo(&data, stamp_data, stamp_len);
			appendStringInfoChar(&data, ']');
			batch_add(batch, type, &data);
			/* the call's later events refer to this one's provenance */
			if (stamp_len > 0)
			{
				stamp_data = ",1";
				stamp_len = 2;
			}
		}
		MemoryContextSwitchTo(previous);
		if (level >= 0)
			AtEOXact_GUC(true, level);
		batch_write(batch);
	}
	batch_end(batch);
	if (old_slot != NULL)
		ExecDropSingleTupleTableSlot(old_slot);
	if (new_slot != NULL)
		ExecDropSingleTupleTableSlot(new_slot);
}

/* One event of a call: into the queue, or (packing) into the transaction's pack. */
static void
capture_event(QueueEntry *entry, Datum name, const char *type, StringInfo data, Relation rel,
			  TriggerData *trigdata, bool packing, const char *columns)
{
	int			table;
	Pack	   *pack;

	if (!packing)
	{
		insert_event(entry, name, type, data->data, rel, trigdata);
		return;
	}
	pack = pack_begin(entry, name, rel, trigdata->tg_trigger, columns, &table);
	pack_add(pack, table, type, data->data, data->len, true);
	pack_end_call(pack);
}

Datum
pgshovel_capture(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	Relation	rel;
	TupleDesc	desc;
	QueueEntry *entry;
	Datum		name;
	StringInfoData old_row;
	StringInfoData new_row;
	StringInfoData data;
	StringInfoData stamp;
	RowPlan    *plan;
	const char *type;
	int			level = -1;
	bool		packing;
	bool		copy;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "pgshovel capture: not called as a trigger");
	if (!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		elog(ERROR, "pgshovel capture: must be an AFTER trigger");
	trigger = trigdata->tg_trigger;
	if (trigger->tgnargs < 4 || trigger->tgnargs > 6)
		elog(ERROR, "pgshovel capture: expected 4 to 6 trigger arguments, got %d", trigger->tgnargs);
	packing = trigger->tgnargs == 6 && trigger->tgargs[5][0] != '\0';
	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	name = CStringGetTextDatum(trigger->tgargs[0]);
	entry = queue_entry(trigger->tgargs[0]);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgshovel capture: SPI_connect failed");

	initStringInfo(&stamp);
	if (trigger->tgnargs >= 5 && strcmp(trigger->tgargs[4], "1") == 0)
		append_provenance(&stamp);
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
	{
		initStringInfo(&data);
		appendStringInfoString(&data, "[null,null");
		appendBinaryStringInfo(&data, stamp.data, stamp.len);
		appendStringInfoChar(&data, ']');
		capture_event(entry, name, "T", &data, rel, trigdata, packing, NULL);
		SPI_finish();
		return PointerGetDatum(NULL);
	}
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
	{
		capture_statement(fcinfo, trigdata, entry, name, &stamp, packing);
		SPI_finish();
		return PointerGetDatum(NULL);
	}

	plan = row_plan(fcinfo, rel, trigger->tgargs[3]);
	/* COPY lines instead of JSON (packing.c): packed, without provenance */
	copy = packing && stamp.len == 0 && pack_copy_lines(trigger->tgargs[5]);
	if (!settings_pinned())
		level = pin_settings();
	initStringInfo(&old_row);
	initStringInfo(&new_row);
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		type = "I";
		render(&new_row, plan, desc, trigdata->tg_trigtuple, copy);
	}
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		type = "U";
		render(&old_row, plan, desc, trigdata->tg_trigtuple, copy);
		render(&new_row, plan, desc, trigdata->tg_newtuple, copy);
	}
	else
	{
		type = "D";
		render(&old_row, plan, desc, trigdata->tg_trigtuple, copy);
	}
	if (level >= 0)
		AtEOXact_GUC(true, level);

	if (type[0] == 'U' && old_row.len == new_row.len
		&& memcmp(old_row.data, new_row.data, old_row.len) == 0)
	{
		SPI_finish();
		return PointerGetDatum(NULL);
	}
	initStringInfo(&data);
	if (copy)
	{
		/* an INSERT's new line, a DELETE's old line, an UPDATE's old and new lines */
		appendBinaryStringInfo(&data, old_row.data, old_row.len);
		if (type[0] == 'U')
			appendStringInfoChar(&data, '\n');
		appendBinaryStringInfo(&data, new_row.data, new_row.len);
		capture_event(entry, name, type, &data, rel, trigdata, packing, plan->column_list);
		SPI_finish();
		return PointerGetDatum(NULL);
	}
	appendStringInfoChar(&data, '[');
	if (old_row.len > 0)
		appendBinaryStringInfo(&data, old_row.data, old_row.len);
	else
		appendStringInfoString(&data, "null");
	appendStringInfoChar(&data, ',');
	if (new_row.len > 0)
		appendBinaryStringInfo(&data, new_row.data, new_row.len);
	else
		appendStringInfoString(&data, "null");
	appendBinaryStringInfo(&data, stamp.data, stamp.len);
	appendStringInfoChar(&data, ']');
	capture_event(entry, name, type, &data, rel, trigdata, packing, NULL);
	SPI_finish();
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(pgshovel_capture_version);

/*
 * Contract 1, row triggers only: what pgshovel before statement triggers
 * asks. This library still serves it (row triggers work as they did).
 */
Datum
pgshovel_capture_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(1);
}

PG_FUNCTION_INFO_V1(pgshovel_capture_contract);

/*
 * Contract 2, statement triggers with transition tables besides row triggers:
 * what pgshovel before provenance asks. This library still serves it (triggers
 * with 4 arguments write what they did).
 */
Datum
pgshovel_capture_contract(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(2);
}

PG_FUNCTION_INFO_V1(pgshovel_capture_revision);

/*
 * The contract version of this library: pgshovel-admin installs the C trigger
 * only where the library answers the version it expects (else PL/pgSQL).
 * 3: provenance (TG_ARGV[4]), besides everything of contract 2.
 */
Datum
pgshovel_capture_revision(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(CONTRACT);
}

PG_FUNCTION_INFO_V1(pgshovel_capture_contract_version);

/*
 * The highest contract this library serves; it serves every lower one too
 * (triggers installed for them work as they did). 4: packing (TG_ARGV[5], see
 * packing.c) besides everything of contract 3; 5: packs of COPY lines
 * (TG_ARGV[5] "ROWS,BYTES,copy"). pgshovel-admin from contract 4 on asks this
 * function and takes any answer at least its own.
 */
Datum
pgshovel_capture_contract_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(CONTRACT_VERSION);
}

PG_FUNCTION_INFO_V1(pgshovel_capture_nothing);

/*
 * A trigger function that captures nothing: the bench puts it in the place of
 * the capture function, under the same triggers (bench/_captures.py
 * "trigger-bound"), to measure what PostgreSQL's firing of those triggers
 * costs the writer before any capture work, the least any capture by these
 * triggers can cost. Never installed by pgshovel-admin.
 */
Datum
pgshovel_capture_nothing(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "pgshovel capture: not called as a trigger");
	return PointerGetDatum(NULL);
}
