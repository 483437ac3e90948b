"""From MLflow to the paper's tables: runs read into pandas, tables, figures, the paper's numbers, the HTML report
and the results files behind README's tables."""
