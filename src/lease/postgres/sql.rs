//! The PostgreSQL store's SQL: the table's definition and the statements, for one table.

/// How many unusable nodes an [`Error::AllNodesHeld`](crate::Error::AllNodesHeld) names.
const UNUSABLE_NAMED: i64 = 3;

/// The table's definition.
pub(super) fn schema(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    layout            text        NOT NULL,
    node              bigint      NOT NULL CHECK (node >= 0),
    claimant          text,
    holder            text,
    fence             bigint      NOT NULL DEFAULT 0,
    lease_expires_at  timestamptz,
    reserved_until_ms bigint      CHECK (reserved_until_ms >= 0),
    claimed_at        timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (layout, node),
    CHECK ((claimant IS NULL) = (lease_expires_at IS NULL))
);"
    )
}

/// The statements, for one table.
pub(super) struct Sql {
    pub(super) claim_any: String,
    pub(super) claim_exact: String,
    pub(super) extend: String,
    pub(super) renew: String,
    pub(super) release: String,
    pub(super) why_lost: String,
    pub(super) reservation: String,
    pub(super) restore: String,
}

impl Sql {
    pub(super) fn new(t: &str) -> Sql {
        // A row is free when released or when its lease expired, on the database's clock.
        let free = "(claimant IS NULL OR lease_expires_at <= clock_timestamp())";
        let holder = "coalesce(host(inet_client_addr()), 'local') || ' pid ' || $5::int8";
        let lease = "clock_timestamp() + $4::int8 * interval '1 millisecond'";
        // $1 layout, $2 highest node, $3 claimant, $4 TTL (ms), $5 pid.
        let claim_any = format!(
            "WITH free AS (
                SELECT node FROM {t}
                WHERE layout = $1::text AND node <= $2::int8 AND {free}
                  AND (reserved_until_ms IS NULL OR reserved_until_ms >= 0)
                ORDER BY node LIMIT 1
                FOR UPDATE SKIP LOCKED
            ), gap AS (
                SELECT CASE
                    WHEN NOT EXISTS (SELECT 1 FROM {t} WHERE layout = $1 AND node = 0) THEN 0::int8
                    ELSE (SELECT min(a.node) + 1 FROM {t} a
                          WHERE a.layout = $1 AND a.node < $2
                            AND NOT EXISTS (SELECT 1 FROM {t} b
                                            WHERE b.layout = $1 AND b.node = a.node + 1))
                END AS node
            ), pick AS (
                SELECT free.node AS existing, gap.node AS missing FROM gap LEFT JOIN free ON true
            ), upd AS (
                UPDATE {t} AS r SET claimant = $3::text, holder = {holder}, fence = r.fence + 1,
                    lease_expires_at = {lease}, claimed_at = clock_timestamp(),
                    updated_at = clock_timestamp()
                FROM pick
                WHERE r.layout = $1 AND r.node = pick.existing
                  AND (pick.missing IS NULL OR pick.existing < pick.missing)
                  AND (r.claimant IS NULL OR r.lease_expires_at <= clock_timestamp())
                RETURNING r.node, r.fence, r.reserved_until_ms
            ), ins AS (
                INSERT INTO {t} (layout, node, claimant, holder, fence, lease_expires_at,
                                 claimed_at, updated_at)
                SELECT $1, pick.missing, $3, {holder}, 1, {lease}, clock_timestamp(),
                       clock_timestamp()
                FROM pick
                WHERE pick.missing IS NOT NULL
                  AND (pick.existing IS NULL OR pick.missing < pick.existing)
                ON CONFLICT (layout, node) DO NOTHING
                RETURNING node, fence, reserved_until_ms
            ), bad AS (
                SELECT node FROM {t}
                WHERE layout = $1 AND node <= $2 AND {free} AND reserved_until_ms < 0
            )
            SELECT pick.existing, pick.missing, got.node, got.fence, got.reserved_until_ms,
                   (SELECT count(*) FROM bad),
                   coalesce((SELECT array_agg(node ORDER BY node)
                             FROM (SELECT node FROM bad ORDER BY node LIMIT {UNUSABLE_NAMED}) n),
                            '{{}}'::int8[])
            FROM pick
            LEFT JOIN (SELECT * FROM upd UNION ALL SELECT * FROM ins) got ON true"
        );
        let claim_exact = format!(
            "INSERT INTO {t} AS r (layout, node, claimant, holder, fence, lease_expires_at,
                                   claimed_at, updated_at)
            VALUES ($1::text, $2::int8, $3::text, {holder}, 1, {lease}, clock_timestamp(),
                    clock_timestamp())
            ON CONFLICT (layout, node) DO UPDATE
                SET claimant = EXCLUDED.claimant, holder = EXCLUDED.holder,
                    fence = r.fence + 1, lease_expires_at = EXCLUDED.lease_expires_at,
                    claimed_at = EXCLUDED.claimed_at, updated_at = EXCLUDED.updated_at
                WHERE r.claimant IS NULL OR r.lease_expires_at <= clock_timestamp()
            RETURNING r.fence, r.reserved_until_ms"
        );
        // The claim's identity: $1 layout, $2 node, $3 claimant, $4 fencing counter.
        let guard = "layout = $1::text AND node = $2::int8 AND claimant = $3::text \
                     AND fence = $4::int8";
        let extend = format!(
            "UPDATE {t} SET reserved_until_ms = greatest(reserved_until_ms, $5::int8),
                updated_at = clock_timestamp()
            WHERE {guard} AND lease_expires_at > clock_timestamp()
            RETURNING 1"
        );
        let renew = format!(
            "UPDATE {t} SET lease_expires_at = clock_timestamp() + $5::int8 * interval '1 millisecond',
                reserved_until_ms = greatest(reserved_until_ms, $6::int8),
                updated_at = clock_timestamp()
            WHERE {guard} AND lease_expires_at > clock_timestamp()
            RETURNING floor(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::int8"
        );
        let release = format!(
            "UPDATE {t} SET reserved_until_ms = coalesce($5::int8, reserved_until_ms),
                fence = fence - $6::int8,
                claimant = NULL, holder = NULL, lease_expires_at = NULL,
                updated_at = clock_timestamp()
            WHERE {guard}
            RETURNING 1"
        );
        let why_lost = format!(
            "SELECT claimant, fence, lease_expires_at <= clock_timestamp() FROM {t}
            WHERE layout = $1::text AND node = $2::int8"
        );
        // The node's reservation as it is now, for the claim that holds it.
        let reservation = format!(
            "SELECT reserved_until_ms FROM {t}
            WHERE {guard} AND lease_expires_at > clock_timestamp()"
        );
        // A holder that lost its claim records the time it used ($3), raising the node's
        // reservation and nothing else: a row held by a successor keeps its claimant, lease
        // and fencing counter; a deleted row comes back free, with only the reservation.
        let restore = format!(
            "INSERT INTO {t} AS r (layout, node, reserved_until_ms, updated_at)
            VALUES ($1::text, $2::int8, $3::int8, clock_timestamp())
            ON CONFLICT (layout, node) DO UPDATE
                SET reserved_until_ms = greatest(r.reserved_until_ms, EXCLUDED.reserved_until_ms),
                    updated_at = clock_timestamp()
            RETURNING 1"
        );
        Sql {
            claim_any,
            claim_exact,
            extend,
            renew,
            release,
            why_lost,
            reservation,
            restore,
        }
    }
}
