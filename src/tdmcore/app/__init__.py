"""The command line (``tdmcore``): commands, the link catalog, the report
folder and the plots."""
