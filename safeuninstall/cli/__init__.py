"""The command line: click commands and the text renderers."""
