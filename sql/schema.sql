-- pgshovel schema capture: one set of objects per cluster, in schema pgshovel_<cluster>.
--
-- Installed by pgshovel-admin (set create / set update / cluster upgrade) with
-- psycopg2.sql: {schema} is the cluster's schema, {triggers} a LIKE pattern
-- matching the cluster's trigger names, {queues} the cluster's queue name prefix.
-- Statements are separated by lines holding only "-- statement".
--
-- Every change to a captured table's shape is written into the queue of every
-- set capturing it, inside the DDL's own transaction, as an event of type 'S'
-- (schema), so it is ordered exactly between the mutations before and after:
--   ev_data    JSON: kind (announce|alter|drop|remove), command (tag), relation
--              (oid), rewritten (the statement had a USING clause), columns
--              (every live column: name, number, type_oid, sql_type, not_null,
--              has_default, has_missing, missing (attmissingval's text),
--              generated), indexes (unique, valid, plain: primary + columns),
--              captured (the set's column list, null: all), key_columns
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
        shape := json_build_object(
            'schema', namespace, 'table', relation,
            'columns', (SELECT json_agg(json_build_object(
                    'name', c->>'name', 'number', c->'number', 'sql_type', c->>'sql_type',
                    'not_null', c->'not_null', 'generated', c->'generated'))
                FROM json_array_elements(columns) AS c),
            'indexes', indexes,
            'captured', arguments[4],
            'key_columns', arguments[3])::text;
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
                'key_columns', arguments[3]::json)::text);
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
CREATE OR REPLACE FUNCTION {schema}.on_ddl() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $pgshovel$
DECLARE
    target oid;
    -- ALTER COLUMN ... TYPE ... USING rewrites values in a way no row event shows.
    rewritten boolean := coalesce(current_query() ~* '\musing\M', true);
BEGIN
    FOR target IN
        SELECT DISTINCT c.objid FROM pg_event_trigger_ddl_commands() c
        WHERE c.classid = 'pg_catalog.pg_class'::regclass
          AND c.object_type IN ('table', 'table column')
    LOOP
        PERFORM {schema}.announce(target, 'alter', tg_tag, rewritten, true, NULL);
    END LOOP;
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
