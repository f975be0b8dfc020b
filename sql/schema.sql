-- pgshovel schema capture: one set of objects per cluster, in schema pgshovel_<cluster>.
--
-- Installed by pgshovel-admin (set create / set update / cluster upgrade) with
-- psycopg2.sql: {schema} is the cluster's schema, {triggers} a LIKE pattern
-- matching the cluster's trigger names, {queues} the cluster's queue name prefix,
-- {rewrites} the name of a transaction-local setting (see on_rewrite).
-- Statements are separated by lines holding only "-- statement".
--
-- Every change to a captured table's shape is written into the queue of every
-- set capturing it, inside the DDL's own transaction, as an event of type 'S'
-- (schema), so it is ordered exactly between the mutations before and after:
--   ev_data    JSON: kind (announce|alter|drop|remove), command (tag), relation
--              (oid), rewritten (the command changed existing rows' values in a
--              way the shape does not tell: see on_ddl), columns (every live
--              column: name, number, type_oid, sql_type, not_null, has_default,
--              has_missing, missing (attmissingval's text), generated), indexes
--              (unique, valid, plain: primary + columns), captured (the set's
--              column list, null: all), key_columns, disabled (the set's
--              triggers on the table that do not fire: DISABLE TRIGGER, ENABLE
--              REPLICA TRIGGER), uncaptured (true: a table took the name of one
--              of the set's tables without the set's triggers: see claim)
--   ev_extra1  schema, ev_extra2 table (their names now), ev_extra3 set version,
--   ev_extra4  key columns (JSON)
-- and recorded in {schema}.schema_history, so a relay that meets a table for
-- the first time can decode its events with the shape that was current then.
-- The event triggers fire on DDL only: DML pays nothing for them.

CREATE TABLE IF NOT EXISTS {schema}.schema_history (
    queue text NOT NULL,
    event_id bigint NOT NULL,
    relation oid NOT NULL,
    table_schema text NOT NULL,
    table_name text NOT NULL,
    shape text NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (queue, event_id)
)
-- statement
CREATE INDEX IF NOT EXISTS schema_history_by_name
    ON {schema}.schema_history (queue, table_schema, table_name, event_id)
-- statement
CREATE INDEX IF NOT EXISTS schema_history_by_relation
    ON {schema}.schema_history (queue, relation, event_id)
-- statement
CREATE OR REPLACE FUNCTION {schema}.trigger_arguments(arguments bytea) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
DECLARE
    result text[] := '{{}}';
    rest bytea := arguments;
    cut integer;
BEGIN
    -- pg_trigger.tgargs holds each argument followed by a NUL byte.
    LOOP
        cut := position('\x00'::bytea IN rest);
        EXIT WHEN cut = 0;
        result := result || convert_from(substring(rest FROM 1 FOR cut - 1), 'UTF8');
        rest := substring(rest FROM cut + 1);
    END LOOP;
    RETURN result;
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.record_schema_event(
    queue text, kind text, command text, relation oid, table_schema text, table_name text,
    version text, key_columns text, shape text, data text
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
DECLARE
    event bigint;
BEGIN
    event := pgq.insert_event(queue, 'S', data, table_schema, table_name, version, key_columns);
    INSERT INTO {schema}.schema_history
        VALUES (queue, event, relation, table_schema, table_name, shape, data);
    RETURN event;
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.announce(
    target oid, kind text, command text, rewritten boolean DEFAULT false,
    only_changes boolean DEFAULT false, only_queue text DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO, MDY'
SET intervalstyle = 'postgres'
SET timezone = 'UTC'
SET extra_float_digits = 1
SET bytea_output = 'hex'
AS $pgshovel$
DECLARE
    namespace text;
    relation text;
    columns json;
    indexes json;
    trig record;
    arguments text[];
    shape text;
    previous text;
    disabled text[];
    announced integer := 0;
BEGIN
    SELECT n.nspname, c.relname INTO namespace, relation
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = target AND c.relkind = 'r';
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT coalesce(json_agg(json_build_object(
            'name', a.attname,
            'number', a.attnum,
            'type_oid', a.atttypid,
            'sql_type', format_type(a.atttypid, a.atttypmod),
            'not_null', a.attnotnull,
            'has_default', a.atthasdef,
            'has_missing', a.atthasmissing,
            'missing', CASE WHEN a.atthasmissing THEN a.attmissingval::text END,
            'generated', a.attgenerated <> ''
        ) ORDER BY a.attnum), '[]')
    INTO columns
    FROM pg_attribute a
    WHERE a.attrelid = target AND a.attnum > 0 AND NOT a.attisdropped;
    SELECT coalesce(json_agg(json_build_object(
            'primary', i.indisprimary,
            'columns', ARRAY(
                SELECT a.attname
                FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, position)
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                ORDER BY k.position)
        ) ORDER BY i.indisprimary DESC, i.indexrelid), '[]')
    INTO indexes
    FROM pg_index i
    WHERE i.indrelid = target AND i.indisunique AND i.indisvalid AND i.indimmediate
      AND i.indpred IS NULL AND i.indexprs IS NULL AND NOT (0 = ANY (i.indkey::int2[]));
    FOR trig IN
        SELECT t.tgargs FROM pg_trigger t
        WHERE t.tgrelid = target AND t.tgname LIKE {triggers} AND (t.tgtype & 1) = 1
          AND NOT t.tgisinternal
    LOOP
        arguments := {schema}.trigger_arguments(trig.tgargs);
        CONTINUE WHEN only_queue IS NOT NULL AND arguments[1] <> only_queue;
        -- The set's triggers on the table (those writing into its queue) that do not fire
        -- in an ordinary session: rows written meanwhile are not captured.
        disabled := ARRAY(
            SELECT t.tgname::text FROM pg_trigger t
            WHERE t.tgrelid = target AND t.tgname LIKE {triggers} AND NOT t.tgisinternal
              AND t.tgenabled IN ('D', 'R')
              AND ({schema}.trigger_arguments(t.tgargs))[1] = arguments[1]
            ORDER BY t.tgname);
        shape := json_build_object(
            'schema', namespace, 'table', relation,
            'columns', (SELECT json_agg(json_build_object(
                    'name', c->>'name', 'number', c->'number', 'sql_type', c->>'sql_type',
                    'not_null', c->'not_null', 'generated', c->'generated'))
                FROM json_array_elements(columns) AS c),
            'indexes', indexes,
            'captured', arguments[4],
            'key_columns', arguments[3])::text;
        IF disabled <> '{{}}' THEN
            shape := json_build_object('shape', shape::json, 'disabled', disabled)::text;
        END IF;
        IF only_changes AND NOT rewritten THEN
            SELECT h.shape INTO previous FROM {schema}.schema_history h
            WHERE h.queue = arguments[1] AND h.relation = target
            ORDER BY h.event_id DESC LIMIT 1;
            CONTINUE WHEN previous = shape;
        END IF;
        PERFORM {schema}.record_schema_event(
            arguments[1], kind, command, target, namespace, relation, arguments[2], arguments[3],
            shape,
            json_build_object(
                'kind', kind,
                'command', command,
                'relation', target,
                'rewritten', rewritten,
                'columns', columns,
                'indexes', indexes,
                'captured', CASE WHEN arguments[4] = '' THEN NULL
                                 ELSE to_json(arguments[4]::text[]) END,
                'key_columns', arguments[3]::json,
                'disabled', to_json(disabled))::text);
        announced := announced + 1;
    END LOOP;
    RETURN announced;
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.remove(
    queue text, version text, table_schema text, table_name text, kind text, command text
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
DECLARE
    relation oid;
BEGIN
    SELECT c.oid INTO relation FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = table_schema AND c.relname = table_name;
    RETURN {schema}.record_schema_event(
        queue, kind, command, coalesce(relation, 0), table_schema, table_name, version, NULL,
        '', json_build_object('kind', kind, 'command', command,
                              'relation', coalesce(relation, 0))::text);
END
$pgshovel$
-- statement
-- A watermark of an incremental snapshot (pgshovel-replicate), type 'W', into one of
-- the cluster's queues. The worker's role may call this and nothing else that
-- writes into a queue: it cannot forge mutations or schema events.
CREATE OR REPLACE FUNCTION {schema}.insert_watermark(
    queue text, mark text, table_schema text, table_name text
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
BEGIN
    IF left(queue, length({queues})) <> {queues} THEN
        RAISE EXCEPTION 'pgshovel: % is not a queue of this cluster', queue;
    END IF;
    RETURN pgq.insert_event(queue, 'W', mark, table_schema, table_name, NULL, NULL);
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.claim(target oid, command text) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
-- A table that now holds the name of one of a set's tables (CREATE TABLE after a DROP
-- TABLE, a rename onto the name) without that set's triggers: nothing it does reaches the
-- set's queue. The set's schema history knows the name: its last event there is of
-- another table and does not say the table left the set (remove). An event with
-- uncaptured true then tells consumers that capture of the name stopped; its remedy is
-- set update, whose announcement of this table (this oid) follows it.
DECLARE
    schema_now text;
    name_now text;
    previous record;
    claimed integer := 0;
BEGIN
    SELECT n.nspname, c.relname INTO schema_now, name_now
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = target AND c.relkind = 'r';
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR previous IN
        SELECT q.queue_name AS queue, h.relation, h.data::json->>'kind' AS kind
        FROM pgq.queue q
        CROSS JOIN LATERAL (
            SELECT h.relation, h.data FROM {schema}.schema_history h
            WHERE h.queue = q.queue_name AND h.table_schema = schema_now
              AND h.table_name = name_now
            ORDER BY h.event_id DESC LIMIT 1) h
        WHERE left(q.queue_name, length({queues})) = {queues}
    LOOP
        CONTINUE WHEN previous.relation = target OR previous.kind = 'remove';
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM pg_trigger t
            WHERE t.tgrelid = target AND t.tgname LIKE {triggers} AND NOT t.tgisinternal
              AND ({schema}.trigger_arguments(t.tgargs))[1] = previous.queue);
        PERFORM {schema}.record_schema_event(
            previous.queue, 'alter', command, target, schema_now, name_now, '', NULL, '',
            json_build_object('kind', 'alter', 'command', command, 'relation', target,
                              'uncaptured', true)::text);
        claimed := claimed + 1;
    END LOOP;
    RETURN claimed;
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.type_users(types oid[]) RETURNS TABLE (user_table oid)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
-- The ordinary tables whose values print through one of types: a column of the type, of
-- an array, domain, composite type or range over it (at any depth), or a table typed by it;
-- and their inheritance children.
WITH RECURSIVE used(type) AS (
    SELECT unnest(types)
    UNION
    SELECT e.child FROM used u JOIN (
        SELECT t.typelem AS parent, t.oid AS child FROM pg_type t WHERE t.typelem <> 0
        UNION ALL
        SELECT t.typbasetype, t.oid FROM pg_type t WHERE t.typtype = 'd'
        UNION ALL
        SELECT r.rngsubtype, r.rngtypid FROM pg_range r
        UNION ALL
        SELECT r.rngtypid, r.rngmultitypid FROM pg_range r
        UNION ALL
        SELECT a.atttypid, c.reltype FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.reltype <> 0 AND a.attnum > 0 AND NOT a.attisdropped
    ) e ON e.parent = u.type
), tables(relation) AS (
    SELECT a.attrelid FROM pg_attribute a JOIN used u ON a.atttypid = u.type
    WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION
    SELECT c.oid FROM pg_class c JOIN used u ON c.reloftype = u.type
    UNION
    SELECT i.inhrelid FROM pg_inherits i JOIN tables t ON i.inhparent = t.relation
)
SELECT t.relation FROM tables t JOIN pg_class c ON c.oid = t.relation WHERE c.relkind = 'r'
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.on_rewrite() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
-- PostgreSQL rewrites a table when a command recomputes its rows: a new column's value
-- per row (reason 2: a volatile default, also a domain's; a generated column), a column's
-- values for a new type (4: the old value cast, or a USING expression other than the
-- column itself), a new persistence or access method (1, 8: values unchanged). on_ddl
-- reads what happened from this transaction-local setting, "table:reason,...".
BEGIN
    PERFORM set_config({rewrites},
        coalesce(current_setting({rewrites}, true), '')
            || pg_event_trigger_table_rewrite_oid()::text || ':'
            || pg_event_trigger_table_rewrite_reason()::text || ',',
        true);
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.rewrote(rewrites text[], target oid, reason integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
-- Whether on_rewrite noted a rewrite of target for reason (a bit of its reasons).
SELECT EXISTS (
    SELECT 1 FROM unnest(rewrites) AS entry
    WHERE split_part(entry, ':', 1) = target::text
      AND split_part(entry, ':', 2)::integer & reason <> 0)
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.on_ddl() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
-- Decides from what the command did to the rows (on_rewrite) whether a copy can follow
-- the new shape by itself or must read the table again (rewritten):
-- * values computed per row (reason 2): always read again;
-- * values computed for a new type (reason 4): the old value cast when the statement
--   PostgreSQL received is this one ALTER TABLE and names no USING (a copy replays the
--   cast, or reads the table again when the cast depends on settings); otherwise its USING
--   is unknown (the command ran in a function, a DO block, or with others in one query
--   string): read again;
-- * ALTER TYPE of a type a captured column uses (directly, or through an array, a domain,
--   a composite type, a range, a typed table): existing values print differently when an
--   enum's label was renamed: read again unless the statement is one ALTER TYPE that
--   renames nothing.
-- An ALTER TABLE of a parent changes its inheritance children too: they are announced
-- as well.
DECLARE
    target oid;
    via_type boolean;
    rewrites text[] := string_to_array(rtrim(current_setting({rewrites}, true), ','), ',');
    -- (no statement text known: no statement is plain)
    single boolean := coalesce(rtrim(current_query(), E' \t\r\n;') !~ ';', false);
    plain_table boolean := single AND current_query() ~* '^\s*alter\s+table\s'
        AND current_query() !~* '\musing\M';
    plain_type boolean := single AND current_query() ~* '^\s*alter\s+type\s'
        AND current_query() !~* '\mrename\M';
    altered_types oid[] := ARRAY(
        SELECT c.objid FROM pg_event_trigger_ddl_commands() c
        WHERE c.classid = 'pg_catalog.pg_type'::regclass AND c.command_tag = 'ALTER TYPE');
BEGIN
    FOR target, via_type IN
        WITH RECURSIVE altered(relation) AS (
            SELECT c.objid FROM pg_event_trigger_ddl_commands() c
            WHERE c.classid = 'pg_catalog.pg_class'::regclass
              AND c.object_type IN ('table', 'table column')
            UNION
            SELECT i.inhrelid FROM pg_inherits i JOIN altered a ON i.inhparent = a.relation
        )
        SELECT a.relation, false FROM altered a
        UNION ALL
        SELECT u.user_table, true FROM {schema}.type_users(altered_types) u
        WHERE altered_types <> '{{}}'
    LOOP
        PERFORM {schema}.announce(
            target, 'alter', tg_tag,
            {schema}.rewrote(rewrites, target, 2)
                OR CASE WHEN via_type THEN NOT plain_type
                        ELSE {schema}.rewrote(rewrites, target, 4) AND NOT plain_table END,
            true, NULL);
        rewrites := ARRAY(SELECT entry FROM unnest(rewrites) AS entry
                          WHERE split_part(entry, ':', 1) <> target::text);
        IF NOT via_type THEN
            PERFORM {schema}.claim(target, tg_tag);
        END IF;
    END LOOP;
    IF rewrites IS NOT NULL THEN
        PERFORM set_config({rewrites}, array_to_string(rewrites, ','), true);
    END IF;
END
$pgshovel$
-- statement
CREATE OR REPLACE FUNCTION {schema}.on_drop() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
DECLARE
    dropped record;
    trig record;
    queue text;
BEGIN
    FOR dropped IN
        SELECT * FROM pg_event_trigger_dropped_objects() d WHERE d.object_type = 'table'
    LOOP
        FOR trig IN
            SELECT t.address_names[3] AS name FROM pg_event_trigger_dropped_objects() t
            WHERE t.object_type = 'trigger'
              AND t.address_names[1] = dropped.schema_name
              AND t.address_names[2] = dropped.object_name
              AND t.address_names[3] LIKE {triggers}
              AND t.address_names[3] NOT LIKE '%\_truncate'
        LOOP
            queue := {queues} || substr(trig.name, length({trigger_prefix}) + 1);
            CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pgq.queue q WHERE q.queue_name = queue);
            PERFORM {schema}.record_schema_event(
                queue, 'drop', tg_tag, dropped.objid, dropped.schema_name, dropped.object_name,
                '', NULL, '',
                json_build_object('kind', 'drop', 'command', tg_tag,
                                  'relation', dropped.objid)::text);
        END LOOP;
    END LOOP;
END
$pgshovel$
-- statement
DROP EVENT TRIGGER IF EXISTS {ddl_trigger}
-- statement
CREATE EVENT TRIGGER {ddl_trigger} ON ddl_command_end EXECUTE FUNCTION {schema}.on_ddl()
-- statement
DROP EVENT TRIGGER IF EXISTS {drop_trigger}
-- statement
CREATE EVENT TRIGGER {drop_trigger} ON sql_drop EXECUTE FUNCTION {schema}.on_drop()
-- statement
DROP EVENT TRIGGER IF EXISTS {rewrite_trigger}
-- statement
CREATE EVENT TRIGGER {rewrite_trigger} ON table_rewrite EXECUTE FUNCTION {schema}.on_rewrite()
