-- Identities: people, their agents and service identities, and their API tokens (stored hashed).
-- kind and role hold the values of events.proto's PrincipalKind and Role.

CREATE TABLE principals (
    name       text PRIMARY KEY,
    kind       smallint NOT NULL CHECK (kind IN (1, 2, 3)),      -- person, agent, service
    -- An agent acts for its owner (a person); everyone else owns themselves.
    owner      text NOT NULL REFERENCES principals (name),
    -- Stored for persons and services; an agent's role is always its owner's, looked up when it signs in.
    role       smallint CHECK (role IN (1, 2, 3)),                -- signed-in, member, maintainer
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 2) = (owner <> name)),
    CHECK ((kind = 2) = (role IS NULL))
);

CREATE TABLE api_tokens (
    -- sha256 of the token, hex: tokens are 256-bit random strings, so a fast unsalted hash is enough (see auth.py).
    token_hash  text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    principal   text NOT NULL REFERENCES principals (name),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);

CREATE INDEX api_tokens_principal ON api_tokens (principal);
