"""The payment statements both stores run (`core.domain.ports.PaymentBook`). `GRANT_PLAN`
names the larger of two values `{greatest}`: GREATEST on PostgreSQL, MAX on SQLite.

A person's plan row keeps whether its subscription's renewal was cancelled
(`renewal_cancelled_at`, m035): every grant (a renewal, a new purchase) clears it, as the
plan it gives renews again. `$n` naming a scope's key range (`tg2:`) keeps one bot's rows;
NULL keeps every bot's."""

PLAN_COLUMNS = "person, plan_id, ends_at, charge_id, renewal_cancelled_at"
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
    " charge_id = excluded.charge_id, updated_at = excluded.updated_at,"
    " renewal_cancelled_at = NULL"
    f" RETURNING {PLAN_COLUMNS}"
)
SELECT_PLAN = f"SELECT {PLAN_COLUMNS} FROM person_plans WHERE person = $1 AND ends_at > $2"
CANCEL_RENEWAL = (
    # $1 person, $2 plan, $3 when the renewal was cancelled.
    "UPDATE person_plans SET renewal_cancelled_at = $3 WHERE person = $1 AND plan_id = $2"
    f" RETURNING {PLAN_COLUMNS}"
)
RESUME_RENEWAL = (
    "UPDATE person_plans SET renewal_cancelled_at = NULL WHERE person = $1 AND plan_id = $2"
    f" RETURNING {PLAN_COLUMNS}"
)
PAYMENT_COLUMNS = (
    "charge_id, person, plan_id, stars, currency, payload, created_at, provider_charge_id,"
    " is_recurring, subscription_expires_at, refunded_at"
)
_RENEWAL_CANCELLED = (
    # A subscription's payment: whether its person's plan of that plan will not renew.
    "(SELECT pp.renewal_cancelled_at FROM person_plans pp WHERE pp.person = payments.person"
    " AND pp.plan_id = payments.plan_id AND payments.subscription_expires_at IS NOT NULL)"
)
SELECT_PAYMENT = (
    f"SELECT {PAYMENT_COLUMNS}, {_RENEWAL_CANCELLED} FROM payments WHERE charge_id = $1"
)
MARK_REFUNDED = (
    f"UPDATE payments SET refunded_at = $2 WHERE charge_id = $1 AND refunded_at IS NULL"
    f" RETURNING {PAYMENT_COLUMNS}"
)
REVOKE_PLAN = "DELETE FROM person_plans WHERE person = $1"
SELECT_PAYMENTS = (
    f"SELECT {PAYMENT_COLUMNS}, {_RENEWAL_CANCELLED} FROM payments"
    " WHERE (CAST($1 AS TEXT) IS NULL OR person = $1)"
    " AND (CAST($2 AS TEXT) IS NULL OR plan_id = $2)"
    " ORDER BY created_at DESC, charge_id DESC LIMIT $3"
)
_IN_SCOPE = "(CAST($3 AS TEXT) IS NULL OR substr(person, 1, length($3)) = $3)"
STARS_BY_DAY = (
    # {day}: the UTC day of `created_at`, in each store's words; $3 a key range or NULL.
    "SELECT {day} AS day, COUNT(*), SUM(stars),"
    " SUM(CASE WHEN refunded_at IS NULL THEN 0 ELSE stars END) FROM payments"
    f" WHERE created_at >= $1 AND created_at < $2 AND {_IN_SCOPE} GROUP BY 1 ORDER BY 1"
)
ACTIVE_PLANS = (
    "SELECT COUNT(*) FROM person_plans WHERE ends_at > $1"
    " AND (CAST($2 AS TEXT) IS NULL OR substr(person, 1, length($2)) = $2)"
)
