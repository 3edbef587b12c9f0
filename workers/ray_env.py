"""Ray connection settings shared by the CLI and the test cluster harness."""

# Ray retries an unreachable GCS for ~12 minutes by default; these make a bad `--address` fail in ~10 s
# with a ConnectionError. (A reconnect timeout below the connect timeout would abort the process instead.)
RAY_CONNECT_ENV: dict[str, str] = {
    "RAY_gcs_server_port_wait_time_s": "1",
    "RAY_gcs_rpc_server_connect_timeout_s": "2",
    "RAY_py_gcs_connect_timeout_s": "3",
}
