"""The PDF assembler (reportlab): front page, findings, tables, appendix; it reads results, never steps
an env. What its pages are built from -- figures, layout, the domains' ``ReportContext`` -- is the report
kit, :mod:`fieldrl.reportkit`, which sits below the domains."""
