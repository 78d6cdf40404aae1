"""The payment statements both stores run (`core.domain.ports.PaymentBook`). `GRANT_PLAN`
names the larger of two values `{greatest}`: GREATEST on PostgreSQL, MAX on SQLite."""

INSERT_PAYMENT = (
    "INSERT INTO payments (charge_id, provider_charge_id, person, plan_id, stars, currency,"
    " payload, is_recurring, subscription_expires_at, refunded_at, created_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, $10)"
    " ON CONFLICT (charge_id) DO NOTHING RETURNING charge_id"
)
GRANT_PLAN = (
    # $1 person, $2 plan, $3 now, $4 seconds, $5 until, $6 charge id.
    "INSERT INTO person_plans (person, plan_id, ends_at, charge_id, updated_at)"
    " VALUES ($1, $2, {greatest}($3 + $4, $5), $6, $3)"
    " ON CONFLICT (person) DO UPDATE SET plan_id = excluded.plan_id,"
    " ends_at = {greatest}({greatest}(person_plans.ends_at, $3) + $4, $5),"
    " charge_id = excluded.charge_id, updated_at = excluded.updated_at"
    " RETURNING person, plan_id, ends_at, charge_id"
)
SELECT_PLAN = (
    "SELECT person, plan_id, ends_at, charge_id FROM person_plans"
    " WHERE person = $1 AND ends_at > $2"
)
PAYMENT_COLUMNS = (
    "charge_id, person, plan_id, stars, currency, payload, created_at, provider_charge_id,"
    " is_recurring, subscription_expires_at, refunded_at"
)
SELECT_PAYMENT = f"SELECT {PAYMENT_COLUMNS} FROM payments WHERE charge_id = $1"
MARK_REFUNDED = (
    f"UPDATE payments SET refunded_at = $2 WHERE charge_id = $1 AND refunded_at IS NULL"
    f" RETURNING {PAYMENT_COLUMNS}"
)
REVOKE_PLAN = "DELETE FROM person_plans WHERE person = $1"
SELECT_PAYMENTS = (
    f"SELECT {PAYMENT_COLUMNS} FROM payments"
    " WHERE (CAST($1 AS TEXT) IS NULL OR person = $1)"
    " AND (CAST($2 AS TEXT) IS NULL OR plan_id = $2)"
    " ORDER BY created_at DESC, charge_id DESC LIMIT $3"
)
STARS_BY_DAY = (
    # {day}: the UTC day of `created_at`, in each store's words.
    "SELECT {day} AS day, COUNT(*), SUM(stars),"
    " SUM(CASE WHEN refunded_at IS NULL THEN 0 ELSE stars END) FROM payments"
    " WHERE created_at >= $1 AND created_at < $2 GROUP BY 1 ORDER BY 1"
)
ACTIVE_PLANS = "SELECT COUNT(*) FROM person_plans WHERE ends_at > $1"
