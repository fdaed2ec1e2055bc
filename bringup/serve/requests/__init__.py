"""Request bodies in the OpenAI shape: their schemas, the rules for union-typed fields, ignored and unimplemented fields."""
