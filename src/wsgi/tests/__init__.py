"""Tests of the m0 package and of the fixture Django project."""
