"""The pieces report pages are built from: blocks rendered as Markdown and static HTML
(blocks.py), matplotlib figures (plots.py) and run folders read back (runs.py). babeleval
report and babeleval compare both stand on them."""
