/*
 * queue.c - the PgQ queue as the capture library writes into it: the queue's
 * row in pgq.queue read once per transaction, and one event row written into
 * the queue's current event table, straight (a heap insert and its index
 * entries, what the executor's INSERT would write) when that table is exactly
 * as PgQ makes it, else through a kept SPI plan of an INSERT.
 *
 * Used by the capture trigger (pgshovel_capture.c) and by the packing of its
 * changes into fewer rows (packing.c); it uses neither.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "queue.h"

/* pgq.queue's columns a transaction reads, in this order (QUEUE_SQL's too). */
#define QUEUE_COLUMNS 6
static const char *const queue_columns[QUEUE_COLUMNS] = {
	"queue_id", "queue_data_pfx", "queue_cur_table", "queue_event_seq",
	"queue_disable_insert", "queue_per_tx_limit"
};

#define QUEUE_SQL \
	"SELECT queue_id, queue_data_pfx, queue_cur_table, queue_event_seq," \
	" queue_disable_insert, queue_per_tx_limit" \
	" FROM pgq.queue WHERE queue_name OPERATOR(pg_catalog.=) $1"

/* The columns an event fills, in the order of insert_event's values, then ev_txid. */
static const char *const event_columns[EVENT_COLUMNS] = {
	"ev_id", "ev_time", "ev_type", "ev_data", "ev_extra1", "ev_extra2", "ev_extra3",
	"ev_extra4", "ev_txid"
};

static SPIPlanPtr queue_plan = NULL;
static HTAB *queues = NULL;

QueueEntry *
queue_entry(const char *name)
{
	QueueEntry *entry;
	bool		found;
	char		key[NAME_SIZE];

	if (strlen(name) >= NAME_SIZE)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("pgshovel capture: queue name \"%s\" is too long", name)));
	if (queues == NULL)
	{
		HASHCTL		ctl;

		MemSet(&ctl, 0, sizeof(ctl));
		ctl.keysize = NAME_SIZE;
		ctl.entrysize = sizeof(QueueEntry);
		queues = hash_create("pgshovel capture queues", 16, &ctl, HASH_ELEM | HASH_STRINGS);
	}
	MemSet(key, 0, sizeof(key));
	strlcpy(key, name, NAME_SIZE);
	entry = hash_search(queues, key, HASH_ENTER, &found);
	if (!found)
	{
		entry->lxid = InvalidLocalTransactionId;
		entry->plan = NULL;
		entry->plan_queue_id = -1;
		entry->plan_table = -1;
		entry->tid_generation = 0;
	}
	return entry;
}

/*
 * May events go straight into the event table (heap and index inserts, as the
 * executor would do them) instead of through the kept INSERT plan? Only for a
 * table exactly as PgQ makes it: a plain table without triggers, rules, row
 * security or check constraints, whose other columns have no default and
 * accept NULL, and whose indexes are plain, non-unique column indexes.
 * Anything else takes the INSERT plan, which applies whatever is there.
 */
static bool
direct_possible(QueueEntry *entry)
{
	Relation	rel = table_open(entry->table_oid, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexes;
	ListCell   *cell;
	bool		possible = true;
	int			i;

	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->trigdesc != NULL
		|| rel->rd_rules != NULL || rel->rd_rel->relrowsecurity
		|| (desc->constr != NULL && desc->constr->num_check > 0))
		possible = false;
	for (i = 0; i < EVENT_COLUMNS; i++)
	{
		entry->columns[i] = get_attnum(entry->table_oid, event_columns[i]);
		if (entry->columns[i] == InvalidAttrNumber)
			possible = false;
	}
	for (i = 0; possible && i < desc->natts; i++)
	{
		Form_pg_attribute attribute = TupleDescAttr(desc, i);
		int			k;
		bool		filled = false;

		if (attribute->attisdropped)
			continue;
		for (k = 0; k < EVENT_COLUMNS; k++)
			filled = filled || entry->columns[k] == attribute->attnum;
		if (!filled && (attribute->atthasdef || attribute->attnotnull
						|| attribute->attgenerated))
			possible = false;
	}
	indexes = RelationGetIndexList(rel);
	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), RowExclusiveLock);
		IndexInfo  *info = BuildIndexInfo(index);

		if (info->ii_Expressions != NIL || info->ii_Predicate != NIL || info->ii_Unique
			|| info->ii_ExclusionOps != NULL)
			possible = false;
		index_close(index, NoLock);
	}
	table_close(rel, NoLock);
	return possible;
}

/* One event into the current event table, as the executor's INSERT would write it. */
static void
direct_insert(QueueEntry *entry, Datum *values, const char *nulls)
{
	Relation	rel = table_open(entry->table_oid, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *row = palloc0(sizeof(Datum) * desc->natts);
	bool	   *empty = palloc(sizeof(bool) * desc->natts);
	HeapTuple	tuple;
	List	   *indexes;
	ListCell   *cell;
	int			i;

	for (i = 0; i < desc->natts; i++)
		empty[i] = true;
	for (i = 0; i < EVENT_COLUMNS - 1; i++)
	{
		row[entry->columns[i] - 1] = values[i];
		empty[entry->columns[i] - 1] = nulls[i] == 'n';
	}
	/* ev_txid: what its default, txid_current(), gives */
	row[entry->columns[EVENT_COLUMNS - 1] - 1] =
		Int64GetDatum((int64) U64FromFullTransactionId(GetTopFullTransactionId()));
	empty[entry->columns[EVENT_COLUMNS - 1] - 1] = false;
	tuple = heap_form_tuple(desc, row, empty);
	heap_insert(rel, tuple, GetCurrentCommandId(true), 0, NULL);
	indexes = RelationGetIndexList(rel);
	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), RowExclusiveLock);
		IndexInfo  *info = BuildIndexInfo(index);
		Datum		keys[INDEX_MAX_KEYS];
		bool		missing[INDEX_MAX_KEYS];
		int			k;

		/* like ExecInsertIndexTuples: an index being built is left alone */
		if (index->rd_index->indisready)
		{
			for (k = 0; k < info->ii_NumIndexAttrs; k++)
				keys[k] = heap_getattr(tuple, info->ii_IndexAttrNumbers[k], desc, &missing[k]);
			index_insert(index, keys, missing, &tuple->t_self, rel, UNIQUE_CHECK_NO, false,
						 info);
		}
		index_close(index, NoLock);
	}
	table_close(rel, NoLock);
}

/*
 * Where pgq.queue and its queue_name index are, as read_queue_row last found
 * them: kept across transactions, forgotten on any invalidation of that table
 * or index (dropped, altered, rewritten, an index added or removed), of a
 * relation's name or of a schema, so a lookup never uses what the catalog no
 * longer says. ``generation`` counts the forgettings: a queue's remembered row
 * position (QueueEntry.queue_tid) holds for one generation only.
 */
typedef struct QueueCatalog
{
	bool		valid;
	uint64		generation;
	Oid			relid;
	Oid			index;
	AttrNumber	name_column;
	AttrNumber	columns[QUEUE_COLUMNS];
} QueueCatalog;

static QueueCatalog queue_catalog = {false, 1, InvalidOid, InvalidOid, InvalidAttrNumber};
static bool catalog_callbacks = false;

static void
forget_catalog(void)
{
	queue_catalog.valid = false;
	queue_catalog.generation++;
}

static void
forget_catalog_relation(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == queue_catalog.relid || relid == queue_catalog.index)
		forget_catalog();
}

static void
forget_catalog_name(Datum arg, int cacheid, uint32 hashvalue)
{
	forget_catalog();
}

/*
 * Find pgq.queue, its columns and a plain btree index on queue_name alone into
 * queue_catalog; false when there is none such (the caller then runs the
 * SELECT), which is not remembered.
 */
static bool
find_queue_catalog(void)
{
	uint64		started;
	Oid			namespace;
	Oid			relid;
	Relation	rel;
	List	   *indexes;
	ListCell   *cell;
	int			i;

	if (queue_catalog.valid)
		return true;
	if (!catalog_callbacks)
	{
		CacheRegisterRelcacheCallback(forget_catalog_relation, (Datum) 0);
		CacheRegisterSyscacheCallback(RELNAMENSP, forget_catalog_name, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_catalog_name, (Datum) 0);
		catalog_callbacks = true;
	}
	started = queue_catalog.generation;
	namespace = get_namespace_oid("pgq", true);
	relid = OidIsValid(namespace) ? get_relname_relid("queue", namespace) : InvalidOid;
	if (!OidIsValid(relid))
		return false;
	/* set now, so that an invalidation of it while we look is noticed */
	queue_catalog.relid = relid;
	queue_catalog.index = InvalidOid;
	queue_catalog.name_column = get_attnum(relid, "queue_name");
	for (i = 0; i < QUEUE_COLUMNS; i++)
	{
		queue_catalog.columns[i] = get_attnum(relid, queue_columns[i]);
		if (queue_catalog.columns[i] == InvalidAttrNumber)
			return false;
	}
	rel = table_open(relid, AccessShareLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION || queue_catalog.name_column == InvalidAttrNumber)
	{
		table_close(rel, NoLock);
		return false;
	}
	indexes = RelationGetIndexList(rel);
	foreach(cell, indexes)
	{
		Relation	candidate = index_open(lfirst_oid(cell), AccessShareLock);

		if (!OidIsValid(queue_catalog.index) && candidate->rd_rel->relam == BTREE_AM_OID
			&& candidate->rd_index->indisvalid && candidate->rd_index->indnatts == 1
			&& candidate->rd_index->indkey.values[0] == queue_catalog.name_column
			&& candidate->rd_indexprs == NIL && RelationGetIndexPredicate(candidate) == NIL
			&& candidate->rd_opcintype[0] == TEXTOID)
			queue_catalog.index = RelationGetRelid(candidate);
		index_close(candidate, NoLock);
	}
	table_close(rel, NoLock);
	/* not remembered when an invalidation came in while we looked (taking the locks) */
	if (!OidIsValid(queue_catalog.index) || queue_catalog.generation != started)
		return false;
	queue_catalog.valid = true;
	return true;
}

/* Is the row in slot the queue named name? (bytes equal: else the index decides) */
static bool
slot_is_queue(TupleTableSlot *slot, const char *name)
{
	bool		isnull;
	Datum		value = slot_getattr(slot, queue_catalog.name_column, &isnull);
	text	   *found;

	if (isnull)
		return false;
	found = DatumGetTextPP(value);
	return VARSIZE_ANY_EXHDR(found) == strlen(name)
		&& memcmp(VARDATA_ANY(found), name, strlen(name)) == 0;
}

/*
 * The queue's row in pgq.queue under the statement's snapshot, as the kept
 * SELECT would read it (no executor to start for one row): first at the
 * position where the index led last time (the same fetch an index scan makes
 * from there, along the row's chain of updates in place, so exactly what it
 * would return, when that is still this queue's row), else through its
 * queue_name index. Returns -1 when it cannot (no such index, no SELECT
 * privilege, row security, no snapshot): the caller then runs the SELECT.
 * The text values are copied into the current memory context.
 */
static int
read_queue_row(QueueEntry *entry, Datum *values, bool *nulls)
{
	Relation	rel;
	Relation	index;
	ScanKeyData key;
	IndexScanDesc scan;
	ItemPointer root;
	TupleTableSlot *slot;
	int			found = 0;
	int			i;

	if (!ActiveSnapshotSet() || !find_queue_catalog()
		|| pg_class_aclcheck(queue_catalog.relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return -1;
	rel = table_open(queue_catalog.relid, AccessShareLock);
	if (!queue_catalog.valid || rel->rd_rel->relrowsecurity)
	{
		table_close(rel, NoLock);
		return -1;
	}
	slot = table_slot_create(rel, NULL);
	/* (never past the table's end, should it have become shorter without an invalidation) */
	if (entry->tid_generation == queue_catalog.generation
		&& ItemPointerGetBlockNumber(&entry->queue_tid) < RelationGetNumberOfBlocks(rel))
	{
		IndexFetchTableData *fetch = table_index_fetch_begin(rel);
		ItemPointerData tid = entry->queue_tid;
		bool		call_again = false;
		bool		all_dead = false;

		if (table_index_fetch_tuple(fetch, &tid, GetActiveSnapshot(), slot, &call_again,
									&all_dead) && slot_is_queue(slot, entry->name))
			found = 1;
		table_index_fetch_end(fetch);
	}
	if (!found)
	{
		index = index_open(queue_catalog.index, AccessShareLock);
		ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
							   index->rd_indcollation[0], F_TEXTEQ,
							   CStringGetTextDatum(entry->name));
		scan = index_beginscan(rel, index, GetActiveSnapshot(), 1, 0);
		index_rescan(scan, &key, 1, NULL, 0);
		/* index_getnext_slot's loop, keeping where the index entry points (the chain's root) */
		while (!found && (root = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
		{
			ItemPointerData position = *root;

			if (index_fetch_heap(scan, slot))
			{
				found = 1;
				entry->queue_tid = position;
				entry->tid_generation = queue_catalog.generation;
			}
		}
		index_endscan(scan);
		index_close(index, NoLock);
	}
	for (i = 0; found && i < QUEUE_COLUMNS; i++)
	{
		Form_pg_attribute attribute =
			TupleDescAttr(RelationGetDescr(rel), queue_catalog.columns[i] - 1);

		values[i] = slot_getattr(slot, queue_catalog.columns[i], &nulls[i]);
		if (!nulls[i])
			values[i] = datumCopy(values[i], attribute->attbyval, attribute->attlen);
	}
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
	return found;
}

/* The same through the kept SELECT; SPI must be connected. */
static bool
select_queue_row(Datum name, Datum *values, bool *nulls)
{
	Datum		arguments[1] = {name};
	int			i;

	if (queue_plan == NULL)
	{
		Oid			types[1] = {TEXTOID};
		SPIPlanPtr	plan = SPI_prepare(QUEUE_SQL, 1, types);

		if (plan == NULL)
			elog(ERROR, "pgshovel capture: preparing the queue lookup failed: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		queue_plan = plan;
	}
	if (SPI_execute_plan(queue_plan, arguments, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "pgshovel capture: reading pgq.queue failed");
	if (SPI_processed == 0)
		return false;
	for (i = 0; i < QUEUE_COLUMNS; i++)
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1,
								  &nulls[i]);
	return true;
}

/* Read the queue's row once per transaction (see queue.h); SPI must be connected. */
void
load_queue(QueueEntry *entry, Datum name)
{
	Datum		values[QUEUE_COLUMNS];
	bool		nulls[QUEUE_COLUMNS];
	int			found;

	if (entry->lxid == MyProc->lxid)
		return;
	found = read_queue_row(entry, values, nulls);
	if (found < 0)
		found = select_queue_row(name, values, nulls) ? 1 : 0;
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pgshovel capture: no PgQ queue named \"%s\"", entry->name),
				 errhint("The set's triggers outlived its queue: run pgshovel-admin set drop or set create again.")));
	entry->queue_id = DatumGetInt32(values[0]);
	entry->cur_table = DatumGetInt32(values[2]);
	entry->disabled = DatumGetBool(values[4]);
	entry->per_tx_limit = nulls[5] ? -1 : DatumGetInt32(values[5]);
	if (entry->plan == NULL || entry->plan_queue_id != entry->queue_id
		|| entry->plan_table != entry->cur_table)
	{
		static Oid	types[8] = {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID,
		TEXTOID, TEXTOID, TEXTOID, TEXTOID};
		char	   *prefix = TextDatumGetCString(values[1]);
		char	   *table = psprintf("%s_%d", prefix, entry->cur_table);
		StringInfoData query;
		SPIPlanPtr	plan;

		/* queue_data_pfx is PgQ's own schema-qualified name, e.g. pgq.event_7 */
		initStringInfo(&query);
		appendStringInfo(&query,
						 "INSERT INTO %s (ev_id, ev_time, ev_type, ev_data,"
						 " ev_extra1, ev_extra2, ev_extra3, ev_extra4)"
						 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
						 table);
		plan = SPI_prepare(query.data, 8, types);
		if (plan == NULL)
			elog(ERROR, "pgshovel capture: preparing the insert into %s failed: %s",
				 table, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		if (entry->plan != NULL)
			SPI_freeplan(entry->plan);
		entry->plan = plan;
		entry->plan_queue_id = entry->queue_id;
		entry->plan_table = entry->cur_table;
		/* what queue_event_seq::regclass and the table's name::regclass give */
		entry->event_seq = DatumGetObjectId(DirectFunctionCall1(text_regclass, values[3]));
		entry->table_oid = DatumGetObjectId(DirectFunctionCall1(text_regclass,
																CStringGetTextDatum(table)));
		entry->direct = direct_possible(entry);
	}
	entry->count = 0;
	entry->lxid = MyProc->lxid;
}


/* One row into the current event table (see queue.h). */
void
write_event(QueueEntry *entry, Datum *values, const char *nulls, bool direct)
{
	if (direct)
		direct_insert(entry, values, nulls);
	else if (SPI_execute_plan(entry->plan, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "pgshovel capture: inserting into queue \"%s\" failed", entry->name);
}
