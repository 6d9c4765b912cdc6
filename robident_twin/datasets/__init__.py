"""Importers for real measured datasets (kept outside the project, paths from config)."""
