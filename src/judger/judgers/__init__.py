"""The generic judgers and their configs: NativeJudger (a function or a URL), ComposedJudger."""
