"""Problems: records and splits, the built-in families, sources, and the text format of prompts."""
