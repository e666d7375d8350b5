"""The names of the ``PUBSUB_*`` environment variables, for the daemons' settings
(`pubsub.runtime.settings`) and for the clients, which read theirs without the settings
machinery (`pubsub.runtime.clienttls`)."""

ENV_PREFIX = "PUBSUB_"
#: The environment variable that names a daemon's configuration file.
CONFIG_ENV = ENV_PREFIX + "CONFIG"
