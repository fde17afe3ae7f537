"""Metrics and evaluation runners on the development data sets."""
