"""The statements on people both stores run."""

IS_BLOCKED = "SELECT 1 FROM blocked_people WHERE person = $1"
