"""Report stage: tables and plots, the HTML report, the identified twin's exports."""
