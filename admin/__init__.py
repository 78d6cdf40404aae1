"""The operator's web console, served under `/admin/` by the HTTP server when ADMIN_TOKEN
is set: consultations and their transcripts, the audit log, the evaluator's reports."""
