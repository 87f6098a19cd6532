"""Benchmarks (not tests): ratios against bare LangGraph, measured in one run."""
