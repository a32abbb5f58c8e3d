"""Where ``judge_payload`` runs: worker processes with deadlines, Ray actors, pools of actors."""
