"""What a sweep searches: the study file's schema; loading, sizing, digesting and pre-flighting it; its Optuna space;
the study names a user may type."""
