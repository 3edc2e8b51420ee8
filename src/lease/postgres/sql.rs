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

/// The database's clock now, in Unix ms (rounded down): what a claim and a renewal read of it
/// (`handover::store_floor_ms`, `handover::clock_lead_refused`).
const DB_MS: &str = "floor(extract(epoch FROM clock_timestamp()) * 1000)::int8";

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
                            '{{}}'::int8[]),
                   {DB_MS}
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
            RETURNING r.fence, r.reserved_until_ms, {DB_MS}"
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
            RETURNING floor(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::int8,
                {DB_MS}"
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

/// Whether the server is a standby, and each standby it streams to, as this role sees them:
/// one row per standby (`$2` true), or one row with `$2` false when there is none. Without
/// `pg_monitor`, a standby's name and state are null.
pub(super) const REPLICATION: &str = "SELECT pg_catalog.pg_is_in_recovery(), r.pid IS NOT NULL,
    r.application_name::text, r.sync_state::text
    FROM (SELECT 1) AS one LEFT JOIN pg_catalog.pg_stat_replication AS r ON true";

/// The store's table: its schema, resolved once at connect, and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Table {
    /// The schema: as the options name it, else as resolved at connect (`None` only before).
    pub(super) schema: Option<String>,
    pub(super) name: String,
}

impl Table {
    /// The table as the options name it: `name` or `schema.name`.
    pub(super) fn given(text: &str) -> Table {
        match text.split_once('.') {
            Some((schema, name)) => Table {
                schema: Some(schema.to_owned()),
                name: name.to_owned(),
            },
            None => Table {
                schema: None,
                name: text.to_owned(),
            },
        }
    }

    /// The table as every statement names it: `"schema"."name"`, each identifier quoted, so
    /// that no session's `search_path` decides which table it is.
    pub(super) fn quoted(&self) -> String {
        #[cfg(monoflake_mutant_search_path_table)]
        return quote_ident(&self.name);
        #[cfg(not(monoflake_mutant_search_path_table))]
        match &self.schema {
            Some(schema) => format!("{}.{}", quote_ident(schema), quote_ident(&self.name)),
            None => quote_ident(&self.name),
        }
    }
}

impl std::fmt::Display for Table {
    /// `schema.name`, for messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "{schema}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// An SQL identifier, quoted: `"name"`, any `"` doubled.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What the server says about the table's name: the schema of the table the session's
/// `search_path` finds, the session's current schema (where a table would be created), and
/// every schema holding a table of that name. `$1`: the name.
pub(super) const LOOK_UP_TABLE: &str = "SELECT
    (SELECT n.nspname::text FROM pg_catalog.pg_class c
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = pg_catalog.to_regclass(pg_catalog.quote_ident($1::text))),
    pg_catalog.current_schema()::text,
    coalesce((SELECT pg_catalog.array_agg(n.nspname::text ORDER BY n.nspname)
              FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = $1::text AND c.relkind IN ('r', 'p')), '{}'::text[])";

/// Which schema the table is in (or is to be made in), and whether it exists there; or why
/// none can be chosen.
///
/// A schema the options name is taken as it is. Otherwise the table the session's
/// `search_path` finds, else the session's current schema; and refused when a table of the
/// same name exists in another schema as well: clients with different search paths (a role's
/// own schema first, as `"$user"` puts it) would each use a table of their own, and issue the
/// same IDs.
pub(super) fn resolve(
    given: &Table,
    on_path: Option<&str>,
    current: Option<&str>,
    everywhere: &[String],
) -> Result<(Table, bool), String> {
    let name = &given.name;
    let schema = match (&given.schema, on_path.or(current)) {
        (Some(schema), _) => schema.clone(),
        (None, None) => {
            return Err(format!(
                "the session's search_path names no schema that exists, so the table {name} \
                 has none: name its schema (PgOptions::table(\"SCHEMA.{name}\"), --pg-table \
                 SCHEMA.{name})"
            ));
        }
        (None, Some(schema)) => {
            if schema.starts_with("pg_temp") || schema.starts_with("pg_toast") {
                return Err(format!(
                    "the session's search_path leads to the schema {schema}, which is not one \
                     to keep node claims in: name the table's schema (--pg-table \
                     SCHEMA.{name})"
                ));
            }
            let others: Vec<&str> = everywhere
                .iter()
                .map(String::as_str)
                .filter(|s| *s != schema)
                .collect();
            if !others.is_empty() {
                return Err(format!(
                    "tables named {name} exist in the schemas {} besides {schema}, the one this \
                     session's search_path leads to: clients whose search paths differ would \
                     claim nodes in different tables and issue the same IDs. Name the table's \
                     schema (PgOptions::table(\"SCHEMA.{name}\"), --pg-table SCHEMA.{name})",
                    others.join(", ")
                ));
            }
            schema.to_owned()
        }
    };
    let exists = everywhere.contains(&schema);
    Ok((
        Table {
            schema: Some(schema),
            name: name.clone(),
        },
        exists,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_named_schema_is_taken_as_it_is() {
        let given = Table::given("ids.nodes");
        let (t, exists) = resolve(&given, None, Some("public"), &names(&["public"])).unwrap();
        assert_eq!((t.to_string(), exists), ("ids.nodes".into(), false));
        #[cfg(not(monoflake_mutant_search_path_table))]
        assert_eq!(t.quoted(), "\"ids\".\"nodes\"");
    }

    #[test]
    fn an_unnamed_schema_is_the_one_the_search_path_finds_or_the_current_one() {
        let given = Table::given("nodes");
        let (t, exists) =
            resolve(&given, Some("public"), Some("app"), &names(&["public"])).unwrap();
        assert_eq!((t.to_string(), exists), ("public.nodes".into(), true));
        let (t, exists) = resolve(&given, None, Some("app"), &[]).unwrap();
        assert_eq!((t.to_string(), exists), ("app.nodes".into(), false));
        let e = resolve(&given, None, None, &[]).unwrap_err();
        assert!(e.contains("no schema"), "{e}");
        let e = resolve(&given, None, Some("pg_temp_3"), &[]).unwrap_err();
        assert!(e.contains("pg_temp_3"), "{e}");
    }

    #[test]
    fn a_table_of_the_same_name_in_another_schema_is_refused_unless_named() {
        let given = Table::given("nodes");
        let both = names(&["alice", "bob"]);
        let e = resolve(&given, Some("bob"), Some("bob"), &both).unwrap_err();
        assert!(e.contains("alice") && e.contains("--pg-table"), "{e}");
        let e = resolve(&given, None, Some("carol"), &both).unwrap_err();
        assert!(e.contains("alice, bob"), "{e}");
        assert!(resolve(&Table::given("alice.nodes"), Some("bob"), None, &both).is_ok());
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
