"""A chat's turns: the service the edges call, starting and adding to consultations,
answering, follow-ups, API sessions, settings, history, memory and figures. The top floor
of the engine."""
