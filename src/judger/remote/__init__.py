"""Judgers on Ray: RemoteJudger (one actor), JudgerPool (several), JudgerActor, CPU resources."""
