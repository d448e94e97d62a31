"""PDF reports (reportlab) and shared figures (matplotlib); they read results, never step an env."""
