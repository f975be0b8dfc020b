-- pgshovel capture function: one per cluster, in schema pgshovel_<cluster>.
--
-- Installed by pgshovel-admin (set create / set update / cluster upgrade) with
-- psycopg2.sql: {schema} is the cluster's schema and {hstore} the schema of the
-- hstore extension, both rendered as quoted identifiers; {{ and }} in the body are
-- single braces.
--
-- Every trigger of every set calls it with constant arguments fixed at install
-- time:
--   TG_ARGV[0]  PgQ queue name (pgshovel.<cluster>.<set>)
--   TG_ARGV[1]  set version stamped on every event
--   TG_ARGV[2]  key columns, a JSON array of names ([] for unkeyed tables)
--   TG_ARGV[3]  captured columns, a text[] literal; '' captures every column
--   TG_ARGV[4]  '1': stamp every event with its provenance; absent or '': do not
--
-- Event written with pgq.insert_event:
--   ev_type    'I' | 'U' | 'D' | 'T'
--   ev_data    JSON array [old, new]; each is null or an object mapping column
--              name to the column's text (its type's output function) or null.
--              With provenance: [old, new, provenance], provenance the object
--              {"u":current user,"s":session_user,"a":application_name,
--               "c":client address,"q":query id,"n":pgshovel.annotation}
--              in exactly this key order and spelling (to_json of each string),
--              every key but "s" left out when it says nothing (events stay
--              small): "u" when it equals "s", "a" when empty, "c" over a Unix
--              socket, "q" when 0 (compute_query_id off), "n" when unset or
--              empty. Taken once per call: once per statement for statement
--              triggers, whose events after the first hold [old, new, 1]
--              instead: 1 means "the provenance of the previous event of this
--              transaction" (the call's events are written one after another,
--              so its first event is that previous event or precedes it).
--              "u" is the role the session runs as outside SECURITY
--              DEFINER functions (the role of SET ROLE, else session_user; the
--              C trigger's GetOuterUserId()): this function runs as its owner.
--              "c" is host(inet_client_addr()); "q" the query id of the
--              top-level statement (pg_stat_activity.query_id); "n"
--              current_setting('pgshovel.annotation', true). The query id is
--              read after pg_stat_clear_snapshot(): a transaction's statistics
--              snapshot would show its first statement's.
--   ev_extra1  schema name, ev_extra2 table name (at capture time)
--   ev_extra3  set version, ev_extra4 key columns (TG_ARGV[2] verbatim)
-- ev_txid and ev_time come from PgQ.
--
-- Statement triggers (one per event, FOR EACH STATEMENT) name their transition
-- tables pgshovel_old and pgshovel_new: one event per row, in the order the
-- statement changed them (an UPDATE's old and new rows pair up by position).
-- Row triggers (tables in an inheritance tree) write the row they fire for.
-- A transition table's row is o.* / n.*: a bare o or n would be a column of
-- that name where the table has one; the variables win over the table's
-- columns in the queries (#variable_conflict use_variable).
--
-- hstore(record) renders each column with its output function in C, so values
-- are exactly PostgreSQL's text; the SET clauses pin every setting that changes
-- that text. An UPDATE that leaves the captured columns as they were writes
-- nothing.
CREATE OR REPLACE FUNCTION {schema}.capture() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO, MDY'
SET intervalstyle = 'postgres'
SET timezone = 'UTC'
SET extra_float_digits = 1
SET bytea_output = 'hex'
AS $pgshovel$
#variable_conflict use_variable
DECLARE
    old_row text;
    new_row text;
    columns text[];
    other name;
    stamp text := '';
    who text;
BEGIN
    IF TG_NARGS > 4 AND TG_ARGV[4] = '1' THEN
        PERFORM pg_stat_clear_snapshot();
        who := CASE current_setting('role') WHEN 'none' THEN session_user::text
                   ELSE current_setting('role') END;
        stamp := ',{{' || CASE WHEN who <> session_user::text
                               THEN '"u":' || to_json(who)::text || ',' ELSE '' END
            || '"s":' || to_json(session_user::text)::text
            || coalesce(',"a":' || to_json(nullif(current_setting('application_name'), ''))::text,
                        '')
            || coalesce(',"c":' || to_json(host(inet_client_addr()))::text, '')
            || coalesce(',"q":' || (SELECT nullif(a.query_id, 0)::text
                                    FROM pg_stat_get_activity(pg_backend_pid()) a), '')
            || coalesce(',"n":' || to_json(nullif(current_setting('pgshovel.annotation', true),
                                                  ''))::text, '')
            || '}}';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pgq.insert_event(TG_ARGV[0], 'T', '[null,null' || stamp || ']',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
        RETURN NULL;
    END IF;
    IF TG_LEVEL = 'STATEMENT' THEN
        -- What the C trigger checks (see check_statement_capture in ext/pgshovel_capture.c):
        -- in an inheritance tree a statement trigger does not see exactly its table's rows;
        -- a trigger of the table's own firing after its rows change may change them again
        -- before this writes the statement's events.
        IF (SELECT c.relispartition FROM pg_class c WHERE c.oid = TG_RELID)
           OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = TG_RELID) THEN
            RAISE EXCEPTION 'pgshovel capture: table "%.%" is in an inheritance tree, where its statement triggers cannot capture exactly its rows', TG_TABLE_SCHEMA, TG_TABLE_NAME
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Run pgshovel-admin set update for its sets: it then gets row triggers.';
        END IF;
        SELECT t.tgname INTO other FROM pg_trigger t
            JOIN pg_proc p ON p.oid = t.tgfoid
            JOIN pg_namespace s ON s.oid = p.pronamespace
            WHERE t.tgrelid = TG_RELID AND NOT t.tgisinternal AND t.tgenabled <> 'D'
              AND t.tgtype & 66 = 0 AND t.tgtype & 28 <> 0
              AND NOT (p.proname = 'capture' AND s.nspname LIKE 'pgshovel\_%')
            ORDER BY t.tgname LIMIT 1;
        IF other IS NOT NULL THEN
            RAISE EXCEPTION 'pgshovel capture: table "%.%" has trigger "%", which fires after its rows change: its statement triggers would write the statement''s events after what that trigger changes', TG_TABLE_SCHEMA, TG_TABLE_NAME, other
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Run pgshovel-admin set update for its sets: it then gets row triggers.';
        END IF;
        IF TG_ARGV[3] <> '' THEN
            columns := TG_ARGV[3]::text[];
        END IF;
        IF TG_OP = 'INSERT' THEN
            FOR new_row IN
                SELECT {hstore}.hstore_to_json(CASE WHEN columns IS NULL THEN {hstore}.hstore(n.*)
                    ELSE {hstore}.slice({hstore}.hstore(n.*), columns) END)
                FROM pgshovel_new n
            LOOP
                PERFORM pgq.insert_event(TG_ARGV[0], 'I', '[null,' || new_row || stamp || ']',
                    TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
                IF stamp <> '' THEN
                    stamp := ',1';
                END IF;
            END LOOP;
        ELSIF TG_OP = 'UPDATE' THEN
            FOR old_row, new_row IN
                SELECT o.row, n.row
                FROM (SELECT row_number() OVER () AS position,
                             {hstore}.hstore_to_json(CASE WHEN columns IS NULL
                                 THEN {hstore}.hstore(o.*) ELSE {hstore}.slice({hstore}.hstore(o.*), columns)
                                 END)::text AS row
                      FROM pgshovel_old o) o
                JOIN (SELECT row_number() OVER () AS position,
                             {hstore}.hstore_to_json(CASE WHEN columns IS NULL
                                 THEN {hstore}.hstore(n.*) ELSE {hstore}.slice({hstore}.hstore(n.*), columns)
                                 END)::text AS row
                      FROM pgshovel_new n) n USING (position)
                ORDER BY position
            LOOP
                CONTINUE WHEN old_row = new_row;
                PERFORM pgq.insert_event(TG_ARGV[0], 'U', '[' || old_row || ',' || new_row || stamp || ']',
                    TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
                IF stamp <> '' THEN
                    stamp := ',1';
                END IF;
            END LOOP;
        ELSE
            FOR old_row IN
                SELECT {hstore}.hstore_to_json(CASE WHEN columns IS NULL THEN {hstore}.hstore(o.*)
                    ELSE {hstore}.slice({hstore}.hstore(o.*), columns) END)
                FROM pgshovel_old o
            LOOP
                PERFORM pgq.insert_event(TG_ARGV[0], 'D', '[' || old_row || ',null' || stamp || ']',
                    TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
                IF stamp <> '' THEN
                    stamp := ',1';
                END IF;
            END LOOP;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF TG_ARGV[3] = '' THEN
            old_row := {hstore}.hstore_to_json({hstore}.hstore(OLD));
        ELSE
            old_row := {hstore}.hstore_to_json(
                {hstore}.slice({hstore}.hstore(OLD), TG_ARGV[3]::text[]));
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        IF TG_ARGV[3] = '' THEN
            new_row := {hstore}.hstore_to_json({hstore}.hstore(NEW));
        ELSE
            new_row := {hstore}.hstore_to_json(
                {hstore}.slice({hstore}.hstore(NEW), TG_ARGV[3]::text[]));
        END IF;
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM pgq.insert_event(TG_ARGV[0], 'I', '[null,' || new_row || stamp || ']',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
    ELSIF TG_OP = 'UPDATE' THEN
        IF old_row = new_row THEN
            RETURN NULL;
        END IF;
        PERFORM pgq.insert_event(TG_ARGV[0], 'U', '[' || old_row || ',' || new_row || stamp || ']',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
    ELSE
        PERFORM pgq.insert_event(TG_ARGV[0], 'D', '[' || old_row || ',null' || stamp || ']',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[1], TG_ARGV[2]);
    END IF;
    RETURN NULL;
END
$pgshovel$
