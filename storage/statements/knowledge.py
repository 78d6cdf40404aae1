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

INSERT_VECTOR = (
    "INSERT INTO knowledge_vectors (chunk_id, model, vector)"
    " SELECT id, $3, $4 FROM knowledge_chunks WHERE document_id = $1 AND position = $2"
)
"""A chunk's vector, by its document and position: written in the chunks' transaction."""
VECTOR_VERSION = (
    "SELECT COUNT(*), COALESCE(MAX(chunk_id), 0) FROM knowledge_vectors WHERE model = $1"
)
"""What tells that the vectors of a model changed: chunk ids are never reused and a
vector is written only with its chunk, so a change adds a higher id or removes rows."""
VECTOR_ROWS = (
    "SELECT v.chunk_id, d.role, v.vector FROM knowledge_vectors v"
    " JOIN knowledge_chunks c ON c.id = v.chunk_id"
    " JOIN knowledge_documents d ON d.id = c.document_id"
    " WHERE v.model = $1 AND v.chunk_id > $2 ORDER BY v.chunk_id LIMIT $3"
)
"""A page of a model's vectors with their documents' roles, after chunk id $2."""
PASSAGE_COLUMNS = (
    "SELECT c.id, c.document_id, d.title, c.section, c.page, c.text FROM knowledge_chunks c"
    " JOIN knowledge_documents d ON d.id = c.document_id"
)
"""Passages by chunk id: each store adds its own `WHERE` on a list of ids."""
