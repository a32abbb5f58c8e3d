"""The HTTP reward service behind `judger serve`."""
