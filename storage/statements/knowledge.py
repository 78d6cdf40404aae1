"""The statements on the knowledge base both stores run; each store's search is its own
(`storage/sqlite/knowledge.py`, `storage/postgres/knowledge.py`)."""

_DOCUMENT_COLUMNS = (
    "SELECT d.id, d.title, d.source, d.role, d.content_hash, d.added_at,"
    " (SELECT COUNT(*) FROM knowledge_chunks c WHERE c.document_id = d.id)"
    " FROM knowledge_documents d"
)
SELECT_DOCUMENT = f"{_DOCUMENT_COLUMNS} WHERE d.source = $1"
SELECT_DOCUMENTS = f"{_DOCUMENT_COLUMNS} ORDER BY d.id"
"""A document and how many chunks it has, by source or all of them, oldest first."""

INSERT_DOCUMENT = (
    "INSERT INTO knowledge_documents (title, source, role, content_hash, added_at)"
    " VALUES ($1, $2, $3, $4, $5) RETURNING id"
)
UPDATE_DOCUMENT = (
    "UPDATE knowledge_documents SET title = $2, role = $3, content_hash = $4, added_at = $5"
    " WHERE id = $1"
)
"""A replaced document keeps its id: the operator's `knowledge remove ID` still names it."""

INSERT_CHUNK = (
    "INSERT INTO knowledge_chunks (document_id, position, section, page, text)"
    " VALUES ($1, $2, $3, $4, $5)"
)
DELETE_CHUNKS = "DELETE FROM knowledge_chunks WHERE document_id = $1"
DELETE_DOCUMENT = "DELETE FROM knowledge_documents WHERE id = $1 RETURNING id"
"""Chunks go first, by their document's key range, then the document."""

COUNT_CHUNKS = "SELECT COUNT(*) FROM knowledge_chunks"
ANY_CHUNK = "SELECT 1 FROM knowledge_chunks LIMIT 1"
