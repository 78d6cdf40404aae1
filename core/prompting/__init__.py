"""What the model is sent and how its reply is read: prompts, requests, the context
window, rounds, the clarifying call, fact extraction, early finish. Imports the floors
below it (`core.llm`, `core.domain`, `core.primitives`)."""
