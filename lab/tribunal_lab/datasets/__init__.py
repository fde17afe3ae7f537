"""Builders of the labelled data sets the product trains and calibrates on."""
