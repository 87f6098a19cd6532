"""A runtime role that owns nothing; the chain's head moved only by the owner's trigger.

The role that owns the tables can disable triggers, so it can rewrite the decision log and
recompute every hash. Runtime processes therefore connect as a role that owns nothing and holds
only the privileges ``approvals_grant_runtime`` gives it (``approvals db grant ROLE``): on the
log INSERT and SELECT, on the chain's head SELECT only.

The head still has to move with every insert. ``approvals_audit_chain`` (the BEFORE INSERT
trigger) becomes SECURITY DEFINER, so it locks and updates the head with its owner's rights;
the runtime role itself holds no UPDATE on the head and cannot move it except by appending an
event. Its search_path is pinned (the schema it lives in, then pg_temp last), so a caller
cannot shadow the head or the hash functions with temporary objects of its own.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        DO $do$
        BEGIN
            EXECUTE format('ALTER FUNCTION approvals_audit_chain() SECURITY DEFINER'
                           ' SET search_path = %I, pg_temp', current_schema());
        END
        $do$;
        -- A trigger function is never called directly; firing it checks no EXECUTE right.
        REVOKE EXECUTE ON FUNCTION approvals_audit_chain() FROM PUBLIC;

        -- Grants a runtime role exactly what serve, worker and the CLI need, after refusing a
        -- role that could alter, drop or disable what it is given (see docs/deployment.md).
        -- SECURITY INVOKER: only a caller that may grant on the tables (their owner) can use it.
        CREATE FUNCTION approvals_grant_runtime(p_role name)
        RETURNS TABLE (object text, privileges text)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            who pg_roles;
            schema_name name := current_schema();
            rel record;
            fn record;
            privs text;
        BEGIN
            SELECT * INTO who FROM pg_roles WHERE rolname = p_role;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'role % does not exist; create it first (CREATE ROLE % LOGIN)',
                    quote_ident(p_role), quote_ident(p_role)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF who.rolsuper OR who.rolcreaterole OR who.rolbypassrls THEN
                RAISE EXCEPTION 'role % is a superuser or may create roles or bypass row'
                    ' security: it could take any privilege; use a plain LOGIN role',
                    quote_ident(p_role)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- An owner (or a member of one) can ALTER, DISABLE TRIGGER or DROP; the schema's
            -- owner can drop and recreate any table in it.
            FOR rel IN
                SELECT 'table ' || quote_ident(c.relname) AS what, c.relowner AS owner
                  FROM pg_class c
                 WHERE c.relnamespace = schema_name::regnamespace
                   AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
                UNION ALL
                SELECT 'function ' || p.oid::regprocedure::text, p.proowner
                  FROM pg_proc p
                 WHERE p.pronamespace = schema_name::regnamespace
                   AND p.proname LIKE 'approvals\\_%'
                UNION ALL
                SELECT 'schema ' || quote_ident(n.nspname), n.nspowner
                  FROM pg_namespace n WHERE n.nspname = schema_name
            LOOP
                IF pg_has_role(p_role, rel.owner, 'MEMBER') THEN
                    RAISE EXCEPTION 'role % is, or is a member of, %, the owner of %: it could'
                        ' alter or disable what it is given; use a role that owns nothing',
                        quote_ident(p_role), pg_get_userbyid(rel.owner), rel.what
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            END LOOP;

            -- From nothing, so a second run after an upgrade leaves exactly this set.
            EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', schema_name, p_role);
            EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I',
                           schema_name, p_role);
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), p_role);
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', schema_name, p_role);
            object := 'schema ' || quote_ident(schema_name);
            privileges := 'USAGE';
            RETURN NEXT;

            FOR rel IN
                SELECT c.relname, c.relkind FROM pg_class c
                 WHERE c.relnamespace = schema_name::regnamespace
                   AND c.relkind IN ('r', 'p', 'S')
                 ORDER BY c.relkind, c.relname
            LOOP
                IF rel.relkind = 'S' THEN
                    privs := 'USAGE';
                    EXECUTE format('GRANT USAGE ON SEQUENCE %I.%I TO %I',
                                   schema_name, rel.relname, p_role);
                    object := 'sequence ' || quote_ident(rel.relname);
                ELSE
                    privs := CASE rel.relname
                        -- The decision log is append-only; its head moves only through the
                        -- owner's trigger (approvals_audit_chain is SECURITY DEFINER).
                        WHEN 'audit_events' THEN 'SELECT, INSERT'
                        WHEN 'audit_chain_head' THEN 'SELECT'
                        -- Schema versions: read by readiness, written only by migrations.
                        WHEN 'alembic_version' THEN 'SELECT'
                        WHEN 'checkpoint_migrations' THEN 'SELECT'
                        ELSE 'SELECT, INSERT, UPDATE, DELETE'
                    END;
                    EXECUTE format('GRANT %s ON TABLE %I.%I TO %I',
                                   privs, schema_name, rel.relname, p_role);
                    object := 'table ' || quote_ident(rel.relname);
                END IF;
                privileges := privs;
                RETURN NEXT;
            END LOOP;

            FOR fn IN
                SELECT p.oid::regprocedure AS sig FROM pg_proc p
                 WHERE p.pronamespace = schema_name::regnamespace
                   AND p.proname LIKE 'approvals\\_%'
                   AND p.prorettype <> 'trigger'::regtype
                   AND p.proname <> 'approvals_grant_runtime'
                 ORDER BY 1
            LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn.sig, p_role);
                object := 'function ' || fn.sig::text;
                privileges := 'EXECUTE';
                RETURN NEXT;
            END LOOP;

            -- What the role holds through PUBLIC or another role counts too.
            IF has_table_privilege(p_role, 'audit_events', 'UPDATE, DELETE, TRUNCATE, TRIGGER')
               OR has_table_privilege(p_role, 'audit_chain_head',
                                      'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER') THEN
                RAISE EXCEPTION 'role % can still change the decision log (through PUBLIC or'
                    ' another role it belongs to); revoke that first', quote_ident(p_role)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END
        $fn$;
        REVOKE EXECUTE ON FUNCTION approvals_grant_runtime(name) FROM PUBLIC;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION approvals_grant_runtime(name);
        GRANT EXECUTE ON FUNCTION approvals_audit_chain() TO PUBLIC;
        ALTER FUNCTION approvals_audit_chain() SECURITY INVOKER RESET search_path;
        """
    )
