"""Failed password sign-ins are counted in PostgreSQL, for every web process at once.

Each process counted its own (web.security.LoginThrottle), so N web processes behind a load
balancer allowed N times the guesses. ``sign_in_failures`` holds one row per attempt let
through (counted before its password is checked, as the process's count is), for its account
name (lower-cased) and client address; the limits are the process's: per (name, address) and
per name whatever the address, over a sliding window.

``approvals_sign_in_attempt_v1`` decides and counts in one call: it takes a transaction
advisory lock on the name (the two-key form, so no thread lock shares its key space), reads
the name's counts in a snapshot taken after the lock, and inserts the attempt only when both
are under their limits: attempts sent together to several processes are counted one after
another. It returns the seconds to wait (0: go on) and the counted row's id. It also deletes a
few rows whose window has ended (SKIP LOCKED, so callers never wait on each other for it):
the table holds what is in the window and little more.

A success (storage.sign_ins) clears its client's count (``client_cleared``: those rows leave
the (name, address) count but stay in the name's, which someone else's guesses may have built)
and deletes its own attempt from both.

Revision ID: 0028
Revises: 0027
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE sign_in_failures (
            id bigserial PRIMARY KEY,
            account text NOT NULL,
            client text NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            client_cleared boolean NOT NULL DEFAULT false
        );
        CREATE INDEX sign_in_failures_account ON sign_in_failures (account, at);
        CREATE INDEX sign_in_failures_at ON sign_in_failures (at);

        CREATE FUNCTION approvals_sign_in_attempt_v1(
            p_account text, p_client text, p_attempts integer, p_account_attempts integer,
            p_window_seconds double precision
        ) RETURNS TABLE (wait double precision, counted bigint)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            span constant interval := make_interval(secs => p_window_seconds);
            moment timestamptz;
            nth timestamptz;
        BEGIN
            -- One name's attempts one at a time, across every process; the queries below take
            -- their snapshots after the lock, so they see the attempt counted before.
            PERFORM pg_advisory_xact_lock(7278, hashtext(p_account));
            -- Not waiting for the WAL flush: a count lost to a database crash is at most the
            -- last few hundred milliseconds' (a process's own counts all go when it restarts),
            -- and the flush was most of an attempt's time (bench/sign_in_throttle.py).
            PERFORM set_config('synchronous_commit', 'off', true);
            moment := clock_timestamp();
            wait := 0;
            -- The limit-th newest failure still in the window: the wait ends when it leaves.
            SELECT f.at INTO nth FROM sign_in_failures f
             WHERE f.account = p_account AND f.client = p_client AND NOT f.client_cleared
               AND f.at > moment - span
             ORDER BY f.at DESC OFFSET p_attempts - 1 LIMIT 1;
            IF FOUND THEN
                wait := extract(epoch FROM nth + span - moment);
            END IF;
            SELECT f.at INTO nth FROM sign_in_failures f
             WHERE f.account = p_account AND f.at > moment - span
             ORDER BY f.at DESC OFFSET p_account_attempts - 1 LIMIT 1;
            IF FOUND THEN
                wait := GREATEST(wait, extract(epoch FROM nth + span - moment));
            END IF;
            IF wait > 0 THEN
                counted := NULL;
            ELSE
                wait := 0;
                INSERT INTO sign_in_failures (account, client, at)
                VALUES (p_account, p_client, moment)
                RETURNING id INTO counted;
            END IF;
            -- A few ended rows go with each attempt: a spray of names leaves no heap behind.
            DELETE FROM sign_in_failures
             WHERE id IN (SELECT id FROM sign_in_failures
                           WHERE at <= moment - span
                           ORDER BY at LIMIT 8 FOR UPDATE SKIP LOCKED);
            RETURN NEXT;
        END
        $fn$;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION approvals_sign_in_attempt_v1(text, text, integer, integer,
                                                   double precision);
        DROP TABLE sign_in_failures;
        """
    )
