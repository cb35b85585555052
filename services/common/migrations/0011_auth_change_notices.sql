-- Auth change notices: every change to a stored token or principal is announced on the channel kb_auth_changed, so
-- that the services' caches of signed-in tokens (services/common/auth.py) drop what it makes stale. Payloads:
--   token:<sha256 hex>   a token updated (revoked, expiry moved) or deleted
--   principal:<name>     a principal updated (role, owner) or deleted; an agent's role is its owner's, so the caches
--                        drop the sign-ins of the principal and of its agents
--   all                  api_tokens or principals truncated
-- Inserts are not announced: the caches hold successful sign-ins only, keyed by token hash and naming existing
-- principals (both primary keys), so a new row cannot make a cached one wrong.
-- OLD is the row the caches know: a primary key that changed is announced under its old value.

CREATE FUNCTION kb_notify_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kb_auth_changed', 'token:' || OLD.token_hash);
    RETURN NULL;
END
$$;

CREATE FUNCTION kb_notify_principal_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kb_auth_changed', 'principal:' || OLD.name);
    RETURN NULL;
END
$$;

CREATE FUNCTION kb_notify_auth_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kb_auth_changed', 'all');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_tokens_changed AFTER UPDATE OR DELETE ON api_tokens
    FOR EACH ROW EXECUTE FUNCTION kb_notify_token_changed();
CREATE TRIGGER principals_changed AFTER UPDATE OR DELETE ON principals
    FOR EACH ROW EXECUTE FUNCTION kb_notify_principal_changed();
CREATE TRIGGER api_tokens_truncated AFTER TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION kb_notify_auth_truncated();
CREATE TRIGGER principals_truncated AFTER TRUNCATE ON principals
    FOR EACH STATEMENT EXECUTE FUNCTION kb_notify_auth_truncated();
