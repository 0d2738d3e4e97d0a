"""Outputs of a grading run: ``grades.csv``, ``results.json`` and the HTML
report (a class overview and one feedback page per student).

Everything here reads recorded verdicts only: check messages, reasons and
pitfall hints. Hidden inputs and expected values never reach a verdict, so
they cannot reach a page either.

In:  records read back from the gradebook, the course.
Out: files for instructors and students: CSV, JSON, HTML pages, figures,
     feedback folders, LMS exports, similarity lists.
"""
from grader.report.exports import write_grades_csv, write_results_json
from grader.report.html import write_html_report

__all__ = ["write_grades_csv", "write_results_json", "write_html_report"]
