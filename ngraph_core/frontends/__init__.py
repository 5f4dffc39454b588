"""Frontend connectors: other frameworks' model formats read into (and written from) ngraph graphs."""
