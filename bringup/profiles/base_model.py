"""The base for every profile model: unknown keys are errors, so typos in a profile are caught."""

from pydantic import BaseModel, ConfigDict


class ProfileModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
