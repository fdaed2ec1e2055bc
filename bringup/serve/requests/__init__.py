"""Request bodies in the OpenAI shape: schemas, rules for union-typed fields, ignored and unimplemented fields."""
