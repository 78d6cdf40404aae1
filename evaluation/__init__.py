"""The consultation quality evaluator: simulated users, a judge, and the reports.

`python -m evaluation` plays shipped scenarios through the real consultation service
against any OpenAI-compatible models and scores the final answers.
"""
