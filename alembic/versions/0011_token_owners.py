"""API tokens belong to accounts: the rules count people, not principals.

A person can act through several principals: ``local:alice`` in the web app, and each API token
she owns. Separation of duties and quorum used to compare principal ids, so alice's token could
start a run and her web account approve it, and the two could make a quorum of 2 by themselves.
Now a token names the local account it belongs to (``owner``; none for a service token, which
may start runs but never decide), and the rules compare the person behind each principal.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- The local account a token acts for; NULL for a service token. Accounts are never
        -- deleted (only disabled), so the reference always resolves. A token's owner is set
        -- when it is created and never changes: a token name is never reused (revoked tokens
        -- keep their row), so token:NAME names the same person forever.
        ALTER TABLE api_tokens ADD COLUMN owner text REFERENCES users (name);

        -- The person a principal id acts for: the owner's local principal for a token (NULL
        -- for a service token, or a token name that was never issued), the principal itself
        -- for everything else (local:NAME, oidc:ISSUER#SUBJECT, an operator's CLI name).
        -- approvals.principals.Principal.person is the same mapping for a signed-in principal.
        CREATE FUNCTION approvals_person_of(p_principal text) RETURNS text
        LANGUAGE sql STABLE AS $fn$
            SELECT CASE
                WHEN p_principal LIKE 'token:%' THEN
                    (SELECT 'local:' || t.owner FROM api_tokens t
                      WHERE t.name = substr(p_principal, 7))
                ELSE p_principal
            END
        $fn$;

        -- Who started the run, as a person, kept with each request for separation of duties.
        -- Stored when the request is recorded rather than joined through api_tokens when it is
        -- decided: the approver rules stay a pure function of the request (no lookup that a
        -- later change to the tokens table could turn), and every statement that records a
        -- request gets it, through the trigger, from the same requested_by it stores.
        ALTER TABLE approval_requests ADD COLUMN requested_by_person text;
        UPDATE approval_requests SET requested_by_person = approvals_person_of(requested_by);

        CREATE FUNCTION approvals_request_person() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
            NEW.requested_by_person := approvals_person_of(NEW.requested_by);
            RETURN NEW;
        END
        $fn$;
        CREATE TRIGGER approval_requests_person
            BEFORE INSERT OR UPDATE OF requested_by, requested_by_person ON approval_requests
            FOR EACH ROW EXECUTE FUNCTION approvals_request_person();

        -- One vote per person per request: a person's token and web account are one approver.
        -- The key is what makes a second vote by the same person fail inside the voting
        -- transaction, however the two race. Votes cast before this revision count their
        -- principal as the person (tokens had no owners then).
        ALTER TABLE approval_votes ADD COLUMN person text;
        UPDATE approval_votes SET person = COALESCE(approvals_person_of(principal), principal);
        ALTER TABLE approval_votes ALTER COLUMN person SET NOT NULL;
        ALTER TABLE approval_votes DROP CONSTRAINT approval_votes_pkey;
        ALTER TABLE approval_votes ADD PRIMARY KEY (request_id, person);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        -- A principal always maps to one person, so (request, principal) is still unique.
        ALTER TABLE approval_votes DROP CONSTRAINT approval_votes_pkey;
        ALTER TABLE approval_votes ADD PRIMARY KEY (request_id, principal);
        ALTER TABLE approval_votes DROP COLUMN person;

        DROP TRIGGER approval_requests_person ON approval_requests;
        DROP FUNCTION approvals_request_person();
        ALTER TABLE approval_requests DROP COLUMN requested_by_person;

        DROP FUNCTION approvals_person_of(text);
        ALTER TABLE api_tokens DROP COLUMN owner;
        """
    )
