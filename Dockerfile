# tracescorer daemon image
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY tracescorer ./tracescorer
RUN python -m venv /opt/tracescorer \
 && /opt/tracescorer/bin/pip install --no-cache-dir --disable-pip-version-check -c constraints.txt .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/tracescorer --create-home tracescorer
COPY --from=build /opt/tracescorer /opt/tracescorer
COPY config/tracescorer.yaml /etc/tracescorer/tracescorer.yaml
# the receivers bind to loopback by default; in a container only 0.0.0.0 is reachable through -p
# (set receiver.auth_token, TRACESCORER_AUTH_TOKEN, when the port is reachable beyond your network)
ENV PATH=/opt/tracescorer/bin:$PATH \
    TRACESCORER_CONFIG=/etc/tracescorer/tracescorer.yaml \
    TRACESCORER_STORE__PATH=/var/lib/tracescorer/tracescorer.duckdb \
    TRACESCORER_RECEIVER__GRPC__HOST=0.0.0.0 \
    TRACESCORER_RECEIVER__HTTP__HOST=0.0.0.0 \
    PYTHONUNBUFFERED=1
USER tracescorer
WORKDIR /var/lib/tracescorer
VOLUME ["/var/lib/tracescorer"]
EXPOSE 4317 4318
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:4318/healthz', timeout=2).status == 200 else 1)"
ENTRYPOINT ["tracescorer"]
CMD ["serve"]
