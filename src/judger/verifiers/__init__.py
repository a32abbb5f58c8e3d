"""LLM verifiers: CompassVerifierV2, a generic OpenAI-compatible grader, and a rule-first cascade."""

from judger.verifiers.cascade import CascadeJudger, CascadeJudgerConfig, rule_says_correct
from judger.verifiers.compass import CompassVerifierV2Config, CompassVerifierV2Judger
from judger.verifiers.hosts import ChatHosts, ChatReply, normalize_host
from judger.verifiers.llm import LLMJudger, LLMJudgerConfig
from judger.verifiers.prompts import GRADER_PROMPT, render_prompt, split_grading_prompt
from judger.verifiers.truncation import DEFAULT_FINISH_WORDS, cut_response
from judger.verifiers.verdicts import VerdictParseError, parse_compass_verdict, regex_parser

__all__ = [
    "DEFAULT_FINISH_WORDS",
    "GRADER_PROMPT",
    "CascadeJudger",
    "CascadeJudgerConfig",
    "ChatHosts",
    "ChatReply",
    "CompassVerifierV2Config",
    "CompassVerifierV2Judger",
    "LLMJudger",
    "LLMJudgerConfig",
    "VerdictParseError",
    "cut_response",
    "normalize_host",
    "parse_compass_verdict",
    "regex_parser",
    "render_prompt",
    "rule_says_correct",
    "split_grading_prompt",
]
