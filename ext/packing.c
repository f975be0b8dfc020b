/*
 * packing.c - a transaction's captured changes written as few queue rows.
 *
 * With packing on (contract 4: the triggers' TG_ARGV[5] is "ROWS,BYTES"), each
 * change still takes its own event id from the queue's sequence at the moment
 * it is captured, exactly where an unpacked event would have taken it, but it
 * waits in the transaction's pack of its queue instead of becoming a row of its
 * own. A pack is written as one row when it holds ROWS changes or BYTES bytes
 * of their data, and when the transaction ends (XACT_EVENT_PRE_COMMIT,
 * XACT_EVENT_PRE_PREPARE for PREPARE TRANSACTION): a transaction's single-row
 * statements end up in one row, a bulk statement in one row per chunk. Where
 * events cannot go straight into the event table (see direct_possible in
 * queue.c: they go through the kept INSERT plan, which needs SPI) a
 * trigger call writes its pack before it returns: packing per statement only.
 *
 * The row: ev_id the id of its first change, ev_type 'P', ev_data a header line
 * and then one line per change (lines end with '\n', the last one without):
 *   [[[schema, table, version, keys], ...], [[first_id, count, type, table], ...]]
 * the tables its changes belong to (ev_extra1..4 of an unpacked event: schema
 * and table names, set version, key columns text) and runs of changes in order:
 * `count` changes with the ids first_id, first_id + 1, ..., of event type `type`
 * ('I', 'U', 'D', 'T') on tables[table]; each line is exactly the ev_data the
 * change's unpacked event would hold (JSON, which has no raw newline). ev_time
 * and ev_txid are those of every change (one transaction), ev_extra1..4 null.
 * A pack of one change is written as that change's ordinary event.
 *
 * COPY lines (contract 5: TG_ARGV[5] is "ROWS,BYTES,copy"): the changes of a
 * table captured without provenance are written as COPY text lines instead of
 * JSON, and that table's entry has a fifth element, its captured columns as a
 * JSON array text (the lines' field order): an INSERT is its new row's line, a
 * DELETE its old row's, an UPDATE two lines, old then new. A field is the
 * column's text with '\', tab, newline and carriage return escaped by a
 * backslash ('\\', '\t', '\n', '\r'), NULL is '\N': exactly what
 * pgshovel.stream.rows.copy_field makes of the JSON trigger's text, so the
 * relay forwards the lines as they are. A TRUNCATE stays a JSON change (its
 * table entry has four elements), and a pack holding one COPY change is still
 * written as a packed row (an ordinary event's data is JSON).
 *
 * Order: the queue's order is the order of the changes' ids, so nothing needs
 * writing first when something else enters the queue in the same transaction
 * (a schema event, a watermark, pgq.insert_event): its id falls exactly where it
 * would have without packing. A reader merges the packed rows' changes with the
 * other rows by id (pgshovel.relay.packing).
 *
 * Savepoints: a row written inside a subtransaction disappears when that
 * subtransaction rolls back, so a pack only ever writes the changes of the
 * current subtransaction (and of its children that were released into it); the
 * changes of the outer levels wait until their level is current again. A
 * subtransaction rolled back discards its changes (SubXactCallback). Memory:
 * at most one pack's limit per subtransaction level and queue.
 */
#include "postgres.h"

#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "packing.h"
#include "queue.h"

/* Packed rows longer than this are compressed with LZ4 (where PostgreSQL has it) before they are written. */
#define PACK_COMPRESS_MIN 1024

/* One change waiting in a pack. */
typedef struct PackedChange
{
	int64		id;				/* its event id, taken when it was captured */
	int			table;			/* index into Pack.tables */
	int			end;			/* its line (data and '\n') ends here in Pack.lines */
	SubTransactionId subxact;	/* the subtransaction that captured it */
	char		type;			/* 'I', 'U', 'D', 'T' */
} PackedChange;

/* What an unpacked event holds in ev_extra1..4. */
typedef struct PackTable
{
	char	   *schema;
	char	   *name;
	char	   *version;
	char	   *keys;
	char	   *columns;		/* COPY lines of these columns (a JSON array), or NULL: JSON */
} PackTable;

struct Pack
{
	QueueEntry *entry;
	Pack	   *next;
	int			max_rows;
	int			max_bytes;
	bool		direct;			/* written straight into the event table: may wait for commit */
	PackedChange *changes;
	int			count;
	int			capacity;
	StringInfoData lines;
	PackTable  *tables;
	int			ntables;
	int			table_capacity;
	SubTransactionId level;		/* the subtransaction level_start holds for */
	int			level_start;	/* its first change: the ones before belong to outer levels */
	MemoryContext scratch;		/* one row being written */
};

/* This transaction's packs (one per queue), in a context under TopTransactionContext. */
static MemoryContext pack_context = NULL;
static Pack *packs = NULL;
static bool callbacks_registered = false;

static void pack_xact(XactEvent event, void *arg);
static void pack_subxact(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg);

/* Whether TG_ARGV[5] asks for COPY lines: "ROWS,BYTES,copy". */
bool
pack_copy_lines(const char *argument)
{
	size_t		length = strlen(argument);

	return length > 5 && strcmp(argument + length - 5, ",copy") == 0;
}

/* ROWS,BYTES of TG_ARGV[5] (then ",copy" or nothing), both at least 1. */
static void
parse_limits(const char *argument, int *rows, int *bytes)
{
	char	   *end;
	long		r;
	long		b;

	errno = 0;
	r = strtol(argument, &end, 10);
	if (errno == 0 && *end == ',' && end != argument)
	{
		const char *rest = end + 1;

		b = strtol(rest, &end, 10);
		if (errno == 0 && (*end == '\0' || strcmp(end, ",copy") == 0) && end != rest && r >= 1 && r <= INT_MAX / 2
			&& b >= 1 && b <= MaxAllocSize / 4)
		{
			*rows = (int) r;
			*bytes = (int) b;
			return;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("pgshovel capture: packing argument \"%s\" is not ROWS,BYTES or ROWS,BYTES,copy (two positive integers)",
					argument),
			 errhint("Run pgshovel-admin set update to install the set's triggers again.")));
}

/* The transaction's pack of ``entry``'s queue, with the limits of ``argument``. */
Pack *
pack_for(QueueEntry *entry, const char *argument, bool direct)
{
	Pack	   *pack;
	int			rows;
	int			bytes;

	parse_limits(argument, &rows, &bytes);
	if (!callbacks_registered)
	{
		RegisterXactCallback(pack_xact, NULL);
		RegisterSubXactCallback(pack_subxact, NULL);
		callbacks_registered = true;
	}
	if (pack_context == NULL)
		pack_context = AllocSetContextCreate(TopTransactionContext, "pgshovel capture packs",
											 ALLOCSET_DEFAULT_SIZES);
	for (pack = packs; pack != NULL; pack = pack->next)
	{
		if (pack->entry == entry)
			break;
	}
	if (pack == NULL)
	{
		MemoryContext previous = MemoryContextSwitchTo(pack_context);

		pack = palloc0(sizeof(Pack));
		pack->entry = entry;
		pack->capacity = 16;
		pack->changes = palloc(sizeof(PackedChange) * pack->capacity);
		initStringInfo(&pack->lines);
		pack->table_capacity = 4;
		pack->tables = palloc(sizeof(PackTable) * pack->table_capacity);
		pack->level = InvalidSubTransactionId;
		/* decided once: the queue's event table and its owner's rights hold for the transaction */
		pack->direct = direct;
		pack->scratch = AllocSetContextCreate(pack_context, "pgshovel capture pack row",
											  ALLOCSET_DEFAULT_SIZES);
		pack->next = packs;
		packs = pack;
		MemoryContextSwitchTo(previous);
	}
	pack->max_rows = rows;
	pack->max_bytes = bytes;
	return pack;
}

/* The index of a table's ev_extra1..4 in the pack (added when new). */
int
pack_table(Pack *pack, const char *schema, const char *name, const char *version,
		   const char *keys, const char *columns)
{
	PackTable  *table;
	int			i;

	for (i = pack->ntables - 1; i >= 0; i--)
	{
		table = &pack->tables[i];
		if (strcmp(table->name, name) == 0 && strcmp(table->schema, schema) == 0
			&& strcmp(table->version, version) == 0 && strcmp(table->keys, keys) == 0
			&& (table->columns == NULL ? columns == NULL
				: columns != NULL && strcmp(table->columns, columns) == 0))
			return i;
	}
	if (pack->ntables == pack->table_capacity)
	{
		pack->table_capacity *= 2;
		pack->tables = repalloc(pack->tables, sizeof(PackTable) * pack->table_capacity);
	}
	table = &pack->tables[pack->ntables];
	table->schema = MemoryContextStrdup(pack_context, schema);
	table->name = MemoryContextStrdup(pack_context, name);
	table->version = MemoryContextStrdup(pack_context, version);
	table->keys = MemoryContextStrdup(pack_context, keys);
	table->columns = columns == NULL ? NULL : MemoryContextStrdup(pack_context, columns);
	return pack->ntables++;
}

/* Where the current subtransaction's changes start (those before it cannot be written now). */
static void
find_level(Pack *pack)
{
	SubTransactionId current = GetCurrentSubTransactionId();
	int			i = pack->count;

	if (pack->level == current)
		return;
	/*
	 * Changes are in capture order: those made since the current subtransaction
	 * began (by it, or by children it released: their ids are higher) come last.
	 */
	while (i > 0 && pack->changes[i - 1].subxact >= current)
		i--;
	pack->level = current;
	pack->level_start = i;
}

static inline int
line_start(Pack *pack, int change)
{
	return change > 0 ? pack->changes[change - 1].end : 0;
}

/* The header line of changes [from, to): their tables, then runs of consecutive ids. */
static void
append_header(StringInfo out, Pack *pack, int from, int to)
{
	int		   *number = palloc(sizeof(int) * Max(pack->ntables, 1));
	int			numbered = 0;
	int			i;

	for (i = 0; i < pack->ntables; i++)
		number[i] = -1;
	appendStringInfoString(out, "[[");
	for (i = from; i < to; i++)
	{
		PackTable  *table = &pack->tables[pack->changes[i].table];

		if (number[pack->changes[i].table] >= 0)
			continue;
		number[pack->changes[i].table] = numbered;
		if (numbered++ > 0)
			appendStringInfoChar(out, ',');
		appendStringInfoChar(out, '[');
		escape_json(out, table->schema);
		appendStringInfoChar(out, ',');
		escape_json(out, table->name);
		appendStringInfoChar(out, ',');
		escape_json(out, table->version);
		appendStringInfoChar(out, ',');
		escape_json(out, table->keys);
		if (table->columns != NULL)
		{
			appendStringInfoChar(out, ',');
			escape_json(out, table->columns);
		}
		appendStringInfoChar(out, ']');
	}
	appendStringInfoString(out, "],[");
	i = from;
	while (i < to)
	{
		PackedChange *first = &pack->changes[i];
		int			n = 1;

		while (i + n < to && pack->changes[i + n].id == first->id + n
			   && pack->changes[i + n].type == first->type
			   && pack->changes[i + n].table == first->table)
			n++;
		if (i > from)
			appendStringInfoChar(out, ',');
		appendStringInfo(out, "[" INT64_FORMAT ",%d,\"%c\",%d]", first->id, n, first->type,
						 number[first->table]);
		i += n;
	}
	appendStringInfoString(out, "]]\n");
	pfree(number);
}

/* Changes [from, to) as one row of the queue's event table. */
static void
pack_write(Pack *pack, int from, int to)
{
	MemoryContext previous = MemoryContextSwitchTo(pack->scratch);
	int			start = line_start(pack, from);
	int			length = pack->changes[to - 1].end - 1 - start;	/* without the last '\n' */
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	char		type[2] = {'\0', '\0'};
	text	   *data;
	int			i;

	values[0] = Int64GetDatum(pack->changes[from].id);
	values[1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	if (to - from == 1 && pack->tables[pack->changes[from].table].columns == NULL)
	{
		/* one JSON change: its own event, as without packing */
		PackTable  *table = &pack->tables[pack->changes[from].table];

		type[0] = pack->changes[from].type;
		data = cstring_to_text_with_len(pack->lines.data + start, length);
		values[4] = CStringGetTextDatum(table->schema);
		values[5] = CStringGetTextDatum(table->name);
		values[6] = CStringGetTextDatum(table->version);
		values[7] = CStringGetTextDatum(table->keys);
	}
	else
	{
		StringInfoData header;

		type[0] = 'P';		/* several changes, or COPY lines */
		initStringInfo(&header);
		append_header(&header, pack, from, to);
		data = palloc(VARHDRSZ + header.len + length);
		SET_VARSIZE(data, VARHDRSZ + header.len + length);
		memcpy(VARDATA(data), header.data, header.len);
		memcpy(VARDATA(data) + header.len, pack->lines.data + start, length);
		for (i = 4; i < 8; i++)
		{
			values[i] = (Datum) 0;
			nulls[i] = 'n';
		}
	}
	values[2] = CStringGetTextDatum(type);
	values[3] = PointerGetDatum(data);
#ifdef USE_LZ4
	if (pack->direct && type[0] == 'P' && VARSIZE(data) > PACK_COMPRESS_MIN)
	{
		Datum		compressed = toast_compress_datum(values[3], TOAST_LZ4_COMPRESSION);

		if (DatumGetPointer(compressed) != NULL)
			values[3] = compressed;
	}
#endif
	write_event(pack->entry, values, nulls, pack->direct);
	MemoryContextSwitchTo(previous);
	MemoryContextReset(pack->scratch);
}

/* Write the current subtransaction's changes; the outer levels' stay. */
static void
pack_flush_level(Pack *pack)
{
	find_level(pack);
	if (pack->count > pack->level_start)
		pack_write(pack, pack->level_start, pack->count);
	pack->count = pack->level_start;
	pack->lines.len = line_start(pack, pack->count);
	pack->lines.data[pack->lines.len] = '\0';
}

/* One more change: its id now, its data copied; the pack is written when full. */
void
pack_add(Pack *pack, int table, const char *type, const char *data, int length,
		 bool check_sequence)
{
	QueueEntry *entry = pack->entry;
	PackedChange *change;
	int64		id;

	if (entry->per_tx_limit >= 0 && ++entry->count > entry->per_tx_limit)
		ereport(ERROR,
				(errmsg("pgshovel capture: queue \"%s\" allows at most %d events per transaction",
						entry->name, entry->per_tx_limit)));
	/* the id an unpacked event would get here: its place in the queue's order */
	id = nextval_internal(entry->event_seq, check_sequence);
	find_level(pack);
	/* a change that would take the level's data past the limit goes into the next row */
	if (pack->count > pack->level_start
		&& pack->lines.len - line_start(pack, pack->level_start) + length + 1 > pack->max_bytes)
		pack_flush_level(pack);
	if (pack->count == pack->capacity)
	{
		pack->capacity *= 2;
		pack->changes = repalloc(pack->changes, sizeof(PackedChange) * pack->capacity);
	}
	appendBinaryStringInfo(&pack->lines, data, length);
	appendStringInfoChar(&pack->lines, '\n');
	change = &pack->changes[pack->count++];
	change->id = id;
	change->table = table;
	change->end = pack->lines.len;
	change->subxact = pack->level;
	change->type = type[0];
	if (pack->count - pack->level_start >= pack->max_rows
		|| pack->lines.len - line_start(pack, pack->level_start) >= pack->max_bytes)
		pack_flush_level(pack);
}

/* The end of a trigger call: a pack that cannot wait for commit is written now. */
void
pack_end_call(Pack *pack)
{
	if (!pack->direct)
		pack_flush_level(pack);
}

static void
pack_xact(XactEvent event, void *arg)
{
	Pack	   *pack;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			for (pack = packs; pack != NULL; pack = pack->next)
			{
				if (pack->count == 0)
					continue;
				if (!pack->direct)
					elog(ERROR, "pgshovel capture: %d changes of queue \"%s\" were left unwritten",
						 pack->count, pack->entry->name);
				pack_flush_level(pack);
				if (pack->count != 0)
					elog(ERROR, "pgshovel capture: %d changes of queue \"%s\" are left at commit",
						 pack->count, pack->entry->name);
			}
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the memory goes with TopTransactionContext */
			packs = NULL;
			pack_context = NULL;
			break;
		default:
			break;
	}
}

static void
pack_subxact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid,
			 void *arg)
{
	Pack	   *pack;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (pack = packs; pack != NULL; pack = pack->next)
	{
		int			i = pack->count;

		/* its changes, and those of its children, are the last ones */
		while (i > 0 && pack->changes[i - 1].subxact >= mySubid)
			i--;
		pack->count = i;
		pack->lines.len = line_start(pack, i);
		pack->lines.data[pack->lines.len] = '\0';
		pack->level = InvalidSubTransactionId;
		MemoryContextReset(pack->scratch);
	}
}
